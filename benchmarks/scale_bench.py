"""Upstream's largest shape, scaled: how the engine's cost grows from 1x to 10x (issue 46, item 3).

    python -m benchmarks.scale_bench                  1x, 2x, 5x and 10x, one fresh process each
    python -m benchmarks.scale_bench --factors 1,2    a quick form (make bench)

The large-scale generator file (10 cohorts of 100 ClusterQueues, 50 Workloads each) with its
cohort count multiplied: at 10x, 100 cohorts, 10,000 ClusterQueues and 500,000 Workloads. The
cohorts are alike and independent, as in upstream's file, so a scheduler that does per cycle only
the work of the heads it tries grows linearly. Each factor runs in its own process (peak RSS never
goes down) through the simulator, which is the engine on virtual time; the table gives wall and CPU
seconds, peak RSS, the engine's cycles, and each figure per 1x beside it. Targets: linear or better
(CPU per 1x at most 1.2 times the 1x figure) and under 8 GiB at 10x.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pykueue.sim import driver, generator, simulation
from pykueue.sim.design import Design

SHAPE = Path(__file__).resolve().parents[2] / "shared" / "bench" / "kueue-scheduler-perf" / "large-scale"
MEMORY_TARGET_MIB = 8 * 1024
LINEAR_SLACK = 1.2


def scaled_text(factor: int) -> str:
    """The large-scale generator file with `factor` times its cohorts."""
    text = (SHAPE / "generator.yaml").read_text()
    scaled, found = re.subn(
        r"(- className: cohort\n\s+count: )(\d+)", lambda m: f"{m[1]}{int(m[2]) * factor}", text
    )
    if found != 1:
        raise SystemExit(f"{SHAPE / 'generator.yaml'}: expected one cohort set, found {found}")
    return scaled


def run_one(factor: int) -> dict[str, Any]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    generated = generator.parse(scaled_text(factor), f"large-scale x{factor}")
    design = Design(f"large-scale-x{factor}", generated.objects, generated.cq_classes)
    jobs = design.check(generated.jobs)
    loaded = time.perf_counter()
    result = simulation.simulate(design, jobs, driver.Options(seed=0))
    return {
        "factor": factor,
        "queues": len(generated.cq_classes),
        "workloads": len(jobs),
        "loadSeconds": round(loaded - wall0, 1),
        "wallSeconds": round(time.perf_counter() - wall0, 1),
        "cpuSeconds": round(time.process_time() - cpu0, 1),
        "peakRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "cycles": result.cycles,
        "instants": result.instants,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    base = rows[0]
    unit = base["factor"]
    lines = [
        "| factor | ClusterQueues | Workloads | wall s | CPU s | CPU s per 1x | peak RSS MiB | cycles |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        per = row["cpuSeconds"] / (row["factor"] / unit)
        lines.append(
            f"| {row['factor']}x | {row['queues']:,} | {row['workloads']:,} | {row['wallSeconds']} | "
            f"{row['cpuSeconds']} | {per:.1f} | {row['peakRssMiB']:,} | {row['cycles']:,} |"
        )
    return "\n".join(lines)


def _verdicts(rows: list[dict[str, Any]]) -> list[str]:
    base = rows[0]
    per_base = base["cpuSeconds"] / base["factor"]
    out = []
    for row in rows[1:]:
        growth = (row["cpuSeconds"] / row["factor"]) / per_base
        verdict = "linear or better" if growth <= LINEAR_SLACK else "SUPERLINEAR"
        out.append(f"  {row['factor']}x: CPU per 1x {growth:.2f} times {base['factor']}x's: {verdict}")
    top = rows[-1]
    mem = "under" if top["peakRssMiB"] <= MEMORY_TARGET_MIB else "OVER"
    out.append(f"  {top['factor']}x peak RSS {top['peakRssMiB']:,} MiB: {mem} {MEMORY_TARGET_MIB:,} MiB")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--factors", default="1,2,5,10", help="comma-separated multiples of the shape")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process: one factor, JSON out
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    rows = []
    for factor in (int(f) for f in args.factors.split(",")):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.scale_bench", "--one", str(factor)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(f"{factor}x failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"  {factor}x done: {rows[-1]}", flush=True)
    print("large-scale shape, scaled by its cohort count (simulator, one process per factor)")
    print(_table(rows))
    print("\n".join(_verdicts(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
