"""`pykueue report usage|efficiency` on a real server: its SQLite ledger, real processes, a real
preemption, and a kill -9 of the server between the runs and the report."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from .helpers import EXAMPLES, Server, job, wait_until, write_config

PRICED = 'metadata:\n  name: a100\n  annotations:\n    pykueue.io/price: "nvidia.com/gpu=3.60,cpu=0.36"\n'
# Writes its start, then runs until SIGTERM the first time (it is preempted), 2 s the second.
# The stop may send SIGTERM twice (to the pod's cgroup and its process group): one stop line.
TRAINER = """
echo "start $(date +%s.%N) ${{PYKUEUE_PREEMPTED:-0}}" >> {out}/trainer.log
trap 'trap "" TERM; echo "stop $(date +%s.%N)" >> {out}/trainer.log; exit 0' TERM
if [ "${{PYKUEUE_PREEMPTED:-0}}" = 1 ]; then sleep 2; else sleep 120 & wait; fi
echo "stop $(date +%s.%N)" >> {out}/trainer.log
"""
OWN_SECONDS = 8
URGENT_SECONDS = 2


def _report(server: Server, *args: str) -> Any:
    done = server.cli("report", *args, "--since", "1h", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _spans(path: Path) -> list[tuple[float, float]]:
    lines = [line.split() for line in path.read_text().splitlines()]
    starts = [float(w[1]) for w in lines if w[0] == "start"]
    stops = [float(w[1]) for w in lines if w[0] == "stop"]
    return list(zip(starts, stops, strict=True))


def test_usage_cost_and_lost_work_survive_a_restart(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = (EXAMPLES / "queues.yaml").read_text().replace("metadata:\n  name: a100\n", PRICED, 1)
    config = write_config(tmp_path, queues, gpus=4)
    # The jobs ask for GPUs and CPU only; without the default memory request (docs/standalone.md,
    # "Limits") the report holds exactly the priced resources.
    settings = yaml.safe_load(config.read_text())
    settings["limits"] = {"defaultRequests": {}}
    config.write_text(yaml.safe_dump(settings))
    server = start_server(config)
    out = tmp_path / "out"
    out.mkdir()
    own = job("own", f"sleep {OWN_SECONDS}", namespace="research", gpus=2, priority_class="batch")
    trainer = job(
        "trainer", TRAINER.format(out=out), namespace="research", gpus=2, priority_class="batch", grace=5
    )
    assert server.apply([own]).status_code == 200
    wait_until(lambda: server.jobs()["research/own"]["state"] == "Running")
    assert server.apply([trainer]).status_code == 200
    wait_until(lambda: (out / "trainer.log").exists())  # on product's 2 GPUs, borrowed
    time.sleep(2)
    urgent = job("urgent", f"sleep {URGENT_SECONDS}", namespace="product", gpus=2, priority_class="urgent")
    assert server.apply([urgent]).status_code == 200
    wait_until(lambda: {j["state"] for j in server.jobs().values()} == {"Succeeded"}, timeout=90)
    first, second = _spans(out / "trainer.log")

    server.kill()  # the ledger is in the SQLite file: a kill -9 loses none of it
    server.start()

    rows = {r["group"]: r for r in _report(server, "usage", "--by", "namespace")["rows"]}
    research, product = rows["research"], rows["product"]
    assert (research["runs"], research["preemptedRuns"], product["runs"], product["preemptedRuns"]) == (
        3,
        1,
        1,
        0,
    )
    # Quota is held from admission to the end: a little longer than the processes ran, and
    # conditions carry whole seconds. 2 GPUs per run, so 2 x 2.5 s of slack per run.
    slack = 2 * 2.5 / 3600
    lost_gpu_hours = 2 * (first[1] - first[0]) / 3600
    gpu_hours = 2 * (OWN_SECONDS + (first[1] - first[0]) + (second[1] - second[0])) / 3600
    assert abs(research["lostResourceHours"]["nvidia.com/gpu"] - lost_gpu_hours) <= slack
    assert abs(research["resourceHours"]["nvidia.com/gpu"] - gpu_hours) <= 3 * slack
    assert abs(product["resourceHours"]["nvidia.com/gpu"] - 2 * URGENT_SECONDS / 3600) <= slack
    # 3.60 per GPU-hour, 0.36 per CPU-hour (each job asks for 1 CPU)
    for row in (research, product):
        hours = row["resourceHours"]
        assert abs(row["cost"] - (3.60 * hours["nvidia.com/gpu"] + 0.36 * hours["cpu"])) < 1e-4
        assert abs(hours["cpu"] * 2 - hours["nvidia.com/gpu"]) < 1e-8  # 1 CPU with every 2 GPUs
        assert row["unpriced"] == []
    lost = research["lostResourceHours"]
    assert abs(research["lostCost"] - (3.60 * lost["nvidia.com/gpu"] + 0.36 * lost["cpu"])) < 1e-4

    # Reconciled against the processes' run times the executor recorded on each Job.
    checks = {c["owner"]: c for c in _report(server, "usage")["checks"]}
    assert set(checks) == {"Job/own", "Job/trainer", "Job/urgent"}
    assert all(c["ok"] for c in checks.values()), checks
    ran = (first[1] - first[0]) + (second[1] - second[0])
    assert abs(checks["Job/trainer"]["ranSeconds"] - ran) < 1.0

    by_queue = {r["group"] for r in _report(server, "usage", "--by", "localqueue")["rows"]}
    assert by_queue == {"research/main", "product/main"}

    # Efficiency: research borrowed product's 2 GPUs while its trainer's first run lasted.
    report = _report(server, "efficiency")
    window = (_epoch(report["until"]) - _epoch(report["since"])) or 1.0
    eff = {(r["clusterQueue"], r["resource"]): r for r in report["rows"]}
    assert eff[("research", "nvidia.com/gpu")]["nominal"] == 2
    borrowed = eff[("research", "nvidia.com/gpu")]["borrowed"] * window  # GPU-seconds
    assert abs(borrowed - 2 * (first[1] - first[0])) <= 2 * 2.5 * 2
    assert abs(eff[("product", "nvidia.com/gpu")]["lent"] * window - borrowed) <= 0.1
    assert eff[("product", "nvidia.com/gpu")]["borrowed"] == 0

    # A tenant sees the runs of its own namespaces only (over HTTP with its token).
    created = server.cli("token", "create", "bob", "-n", "product")
    assert created.returncode == 0, created.stderr
    done = server.cli("report", "usage", "--since", "1h", "--format", "json", token=created.stdout.strip())
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert [r["group"] for r in seen["rows"]] == ["product"]
    assert [c["owner"] for c in seen["checks"]] == ["Job/urgent"]

    # The table and CSV forms carry the same rows.
    table = server.cli("report", "usage", "--since", "1h")
    assert table.returncode == 0 and "research" in table.stdout and "all within tolerance" in table.stdout, (
        table
    )
    text = server.cli("report", "usage", "--since", "1h", "--format", "csv").stdout
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert {r["namespace"] for r in parsed} == {"research", "product"}
    assert {r["preempted"] for r in parsed} == {"1", "0"}


def test_report_refuses_bad_input(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=2))
    for args, message in [
        (("usage", "--since", "yesterday"), "--since 'yesterday': expected a duration"),
        (("usage", "--by", "team"), "--by 'team': choose one of"),
        (("usage", "--format", "xml"), "--format 'xml': choose one of"),
        (("costs",), "no report 'costs'"),
        (("usage", "--since", "1h", "--until", "2h"), "must come before --until"),
    ]:
        done = server.cli("report", *args)
        assert done.returncode == 1 and message in done.stderr, (args, done.stderr)
    bad = PRICED.replace("3.60", "lots")
    refused = server.apply(
        (EXAMPLES / "queues.yaml").read_text().replace("metadata:\n  name: a100\n", bad, 1)
    )
    assert refused.status_code == 422 and "metadata.annotations[pykueue.io/price]" in refused.text
    for window in ("since=nan", "since=0&until=nan", "since=-inf", "since=0&until=inf"):
        answer = server.request("GET", f"/api/v1/usage?{window}")
        assert answer.status_code == 422, (window, answer.text)
