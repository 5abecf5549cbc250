"""Issue 45: a preempted job's lost work on a real server: `pykueue describe` prints it
(the "Lost work" line), and it survives a kill -9 and restart of `pykueue up` (the
controller writes it on the Workload as ``pykueue.io/lost-work``; the engine reads it back)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from .helpers import EXAMPLES, Server, job, wait_until, write_config

LOST = re.compile(
    r"^Lost work: (?:.*, )?([0-9.e-]+) nvidia\.com/gpu-hours.* \(thrown away by its preemptions\)$", re.M
)


def _lost_gpu_hours(server: Server) -> float | None:
    done = server.cli("describe", "workload", "trainer", "-n", "research")
    assert done.returncode == 0, done.stderr
    found = LOST.search(done.stdout)
    return float(found.group(1)) if found else None


def test_describe_shows_lost_work_and_it_survives_a_restart(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=4)
    settings = yaml.safe_load(config.read_text())
    settings["limits"] = {"defaultRequests": {}}
    config.write_text(yaml.safe_dump(settings))
    server = start_server(config)
    own = job("own", "sleep 300", namespace="research", gpus=2, priority_class="batch")
    trainer = job("trainer", "sleep 300", namespace="research", gpus=2, priority_class="batch", grace=1)
    assert server.apply([own]).status_code == 200
    wait_until(lambda: server.jobs()["research/own"]["state"] == "Running")
    assert server.apply([trainer]).status_code == 200
    wait_until(lambda: server.jobs()["research/trainer"]["state"] == "Running")  # on product's GPUs
    assert _lost_gpu_hours(server) is None  # not preempted yet: no line
    time.sleep(3)
    urgent = job("urgent", "sleep 300", namespace="product", gpus=2, priority_class="urgent")
    assert server.apply([urgent]).status_code == 200
    wait_until(lambda: server.jobs()["product/urgent"]["state"] == "Running", timeout=60)

    # The trainer ran about 3 s on 2 GPUs before the reclaim: about 2 x 3 / 3600 GPU-hours.
    before = _lost_gpu_hours(server)
    assert before is not None and 2 * 2 / 3600 <= before <= 2 * 30 / 3600, before
    wait_until(lambda: "pykueue.io/lost-work" in _annotations(server), timeout=30)

    server.kill()
    server.start()
    assert _lost_gpu_hours(server) == before


def _annotations(server: Server) -> dict[str, str]:
    for wl in server.api("GET", "/api/v1/objects/Workload", params={"namespace": "research"}):
        owners = wl["metadata"].get("ownerReferences") or []
        if any(o.get("name") == "trainer" for o in owners):
            return wl["metadata"].get("annotations") or {}
    return {}
