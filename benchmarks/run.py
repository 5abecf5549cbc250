"""`make bench`: every benchmark, one after the other, each in a fresh process.

A fresh process per benchmark keeps peak-memory figures honest (ru_maxrss never
goes down) and stops one benchmark's garbage from slowing the next.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = [
    "benchmarks.engine_bench",
    "benchmarks.preemption_bench",
    "benchmarks.tas_bench",
    "benchmarks.sim_bench",
    "benchmarks.estimate_bench",
    "benchmarks.eta_accuracy --quick",
    "benchmarks.ledger_bench",
    "benchmarks.cli_bench --runs 5",
    "benchmarks.scale_bench --factors 1,2",
    "benchmarks.policy_bench --quick",
]


def main() -> int:
    failed = 0
    for module in BENCHMARKS:
        result = subprocess.run([sys.executable, "-m", *module.split()], check=False)
        failed += result.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
