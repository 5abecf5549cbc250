"""Preemption on a real machine: SIGTERM, the grace period for a checkpoint, requeue, resume."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .helpers import EXAMPLES, Server, job, wait_until, write_config

# Research borrows product's GPUs; its trainer saves a checkpoint on SIGTERM, taking 1 s for it.
TRAINER = """
echo "start $(date +%s.%N) $CUDA_VISIBLE_DEVICES preempted=${{PYKUEUE_PREEMPTED:-0}}" >> {out}/trainer.log
trap 'sleep 1; echo "checkpoint $(date +%s.%N)" >> {out}/trainer.log; exit 0' TERM
if [ "${{PYKUEUE_PREEMPTED:-0}}" = 1 ]; then sleep 0.5; else sleep 60 & wait; fi
echo "end $(date +%s.%N)" >> {out}/trainer.log
"""
URGENT = 'echo "start $(date +%s.%N) $CUDA_VISIBLE_DEVICES" >> {out}/urgent.log; sleep 0.5'


def _lines(path: Path, word: str) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.startswith(word)]


def test_preemption_waits_for_the_checkpoint_then_requeues(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=4)
    server = start_server(config)
    out = tmp_path / "out"
    out.mkdir()
    own = job("own", "sleep 60", namespace="research", gpus=2, priority_class="batch")
    trainer = job(
        "trainer", TRAINER.format(out=out), namespace="research", gpus=2, priority_class="batch", grace=10
    )
    assert server.apply([own]).status_code == 200
    wait_until(lambda: server.jobs()["research/own"]["state"] == "Running")
    assert server.apply([trainer]).status_code == 200
    wait_until(lambda: _lines(out / "trainer.log", "start"))
    assert server.jobs()["research/trainer"]["state"] == "Running"  # on product's borrowed GPUs

    urgent = job("urgent", URGENT.format(out=out), namespace="product", gpus=2, priority_class="urgent")
    assert server.apply([urgent]).status_code == 200
    wait_until(lambda: server.jobs()["product/urgent"]["state"] == "Succeeded", timeout=60)
    checkpoint = _lines(out / "trainer.log", "checkpoint")
    assert len(checkpoint) == 1, "the trainer got SIGTERM and had time to save its checkpoint"
    urgent_start = _lines(out / "urgent.log", "start")[0]
    # The urgent job got the trainer's GPUs only once the trainer had finished its checkpoint.
    assert float(urgent_start[1]) >= float(checkpoint[0][1])
    first_devices = _lines(out / "trainer.log", "start")[0][2]
    assert set(urgent_start[2].split(",")) == set(first_devices.split(","))

    events = [e["message"] for e in server.api("GET", "/api/v1/events") if e["source"] == "engine"]
    preempted = [m for m in events if m.startswith("Preempted research/job-trainer-")]
    assert len(preempted) == 1 and "product/job-urgent" in preempted[0], events

    # Requeued, it runs again once the GPUs are back, and knows it was preempted.
    wait_until(lambda: server.jobs()["research/trainer"]["state"] == "Succeeded", timeout=60)
    starts = _lines(out / "trainer.log", "start")
    assert [s[3] for s in starts] == ["preempted=0", "preempted=1"]
    assert server.jobs()["research/trainer"]["preemptions"] == 1
    assert server.jobs()["research/trainer"]["failed"] == 0


def test_grace_period_ends_with_sigkill(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    config = write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=4)
    server = start_server(config)
    out = tmp_path / "out"
    out.mkdir()
    stubborn = f"trap 'echo ignored >> {out}/stubborn.log' TERM; echo started >> {out}/stubborn.log; while true; do sleep 0.1; done"
    research = [
        job("own", "sleep 60", namespace="research", gpus=2, priority_class="batch"),
        job("stubborn", stubborn, namespace="research", gpus=2, priority_class="batch", grace=1),
    ]
    assert server.apply(research[:1]).status_code == 200
    wait_until(lambda: server.jobs()["research/own"]["state"] == "Running")
    assert server.apply(research[1:]).status_code == 200
    wait_until(lambda: (out / "stubborn.log").exists())
    began = time.monotonic()
    assert (
        server.apply(
            [job("urgent", "true", namespace="product", gpus=2, priority_class="urgent")]
        ).status_code
        == 200
    )
    wait_until(lambda: server.jobs()["product/urgent"]["state"] == "Succeeded", timeout=30)
    assert time.monotonic() - began >= 1.0  # it waited out the grace period
    assert "ignored" in (out / "stubborn.log").read_text()
