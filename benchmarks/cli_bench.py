"""The CLI's start-up: every help and the read-only commands, against the 0.3 s target (issue 44, item 4).

    python -m benchmarks.cli_bench            every command's --help, --version, version, and
                                              get/describe/logs against a real `pykueue up`
    python -m benchmarks.cli_bench --runs 5   fewer runs per command (make bench uses 5)

Each command runs as a fresh process, as a user types it; the table gives the median and the
slowest of the runs, after one run to warm the page cache, with the load average of the machine
beside it (a busy machine makes everything slower: compare with `python -c pass`). A row over the
target is marked; the exit status is 0 either way (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.standalone_bench import BIN, Server
from pykueue.cli.main import SUMMARIES

TARGET = 0.3  # seconds
QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: a100, resources: [{name: cpu, nominalQuota: "4"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: default}
spec: {clusterQueue: cq}
"""


def _time(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median and slowest wall time of `runs` fresh processes (after one unmeasured run)."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-400:]}")
        if i:
            times.append(elapsed)
    return statistics.median(times), max(times)


def _commands() -> list[list[str]]:
    helps = [["--help"], ["--version"], ["version"]]
    helps += [[name, "--help"] for name in SUMMARIES if name != "version"]
    return helps


def _submit_one(env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(BIN), "submit", "--queue", "main", "--name", "bench", "--cpu", "1", "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"submit failed: {done.stderr}")
    return "bench"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cli_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=10, help="measured runs per command (default 10)")
    args = parser.parse_args(argv)
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "XDG_CONFIG_HOME": str(root / "config")}
        env.pop("PYKUEUE_SERVER", None)
        rows.append(("python -c pass", *_time([sys.executable, "-c", "pass"], env, args.runs)))
        for command in _commands():
            rows.append(("pykueue " + " ".join(command), *_time([str(BIN), *command], env, args.runs)))
        server = Server(root, QUEUES, gpus=0)
        server.start()
        try:
            env["PYKUEUE_SOCKET"] = str(server.socket)
            job = _submit_one(env)
            for command in (
                ["get", "jobs"],
                ["get", "clusterqueues"],
                ["describe", "job", job],
                ["logs", job],
            ):
                rows.append(("pykueue " + " ".join(command), *_time([str(BIN), *command], env, args.runs)))
        finally:
            server.stop()
    load = os.getloadavg()[0]
    print(f"CLI start-up, median and slowest of {args.runs} runs, load average {load:.1f}, target {TARGET} s")
    width = max(len(name) for name, _, _ in rows)
    over = 0
    for name, median, slowest in rows:
        mark = "" if median <= TARGET or name.startswith("python") else "  over target"
        over += bool(mark)
        print(f"  {name:<{width}}  {median * 1000:6.0f} ms  {slowest * 1000:6.0f} ms{mark}")
    print(f"{len(rows) - 1} commands, {over} over {TARGET} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
