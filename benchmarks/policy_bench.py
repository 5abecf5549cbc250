"""Cost-aware preemption against upstream's choice of victims, in the simulator (issue 45).

A made week of 4 teams sharing 128 GPUs in one cohort (32 nominal each, idle quota lent,
``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``): gangs of 1-64 GPUs
(most small), runtimes log-uniform from 5 minutes to 2 days, three priorities, a declared
limit (``maximumExecutionTimeSeconds``) on 40 % of the jobs and a checkpoint interval on
half of those that run over 2 hours. Each seed makes its own trace and runs it twice:

* ``upstream``: upstream's rules and order of victims;
* ``least-lost``: every ClusterQueue with ``pykueue.io/preemption-cost: {"leastLostWork": true}``
  (docs/governance.md): the same rules, the victims that lose the least work first;
* ``cost-aware``: the same plus ``waitForEnd: 2h`` and ``maxLostWork: 4h``/``putOffFor: 6h``
  (a preemption that would lose more than 4 hours of work the preemptor's size waits, for at
  most 6 hours of the preemptor's wait, before it stops anything).
* ``reservation``: every ClusterQueue with ``pykueue.io/reservation: {"after": "2h"}``
  (docs/governance.md, issue 45 item 1): a workload waiting over 2 hours that cannot fit holds
  the capacity it needs against borrowers, with backfill by declared limit.

Printed per seed and as means: GPU-hours lost to preemption, mean wait, p99 wait of the
largest gangs (32 GPUs and more), GPU utilisation. The target (issue 45): lost GPU-hours
at most half of upstream's at an equal or better mean wait (checked on ``cost-aware``).

    python -m benchmarks.policy_bench            # seeds 1-5, a week each
    python -m benchmarks.policy_bench --quick    # seeds 1-2 (what `make bench` runs)
    python -m benchmarks.policy_bench --seed 1   # one seed (a check)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass
from typing import Any

from pykueue.api import manifests
from pykueue.sim import driver
from pykueue.sim.design import Design
from pykueue.sim.jobs import Job, PodSetSpec

SECOND = 10**6
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
WEEK = 7 * 24 * HOUR
TEAMS = ("vision", "language", "speech", "research")
NOMINAL = 32
SIZES = ((1, 30), (2, 20), (4, 20), (8, 15), (16, 8), (32, 5), (64, 2))
PRIORITIES = ((0, 60), (50, 30), (100, 10))
JOBS_PER_WEEK = 360  # about 85 % of the 128 GPUs' week on average
LARGE = 32
POLICY = {"pykueue.io/preemption-cost": '{"leastLostWork": true}'}
COST_AWARE = {
    "pykueue.io/preemption-cost": '{"leastLostWork": true, "waitForEnd": "2h", "maxLostWork": "4h", "putOffFor": "6h"}'
}
RESERVATION = {"pykueue.io/reservation": '{"after": "2h"}'}
ARMS: dict[str, dict[str, str] | None] = {
    "upstream": None,
    "least-lost": POLICY,
    "cost-aware": COST_AWARE,
    "reservation": RESERVATION,
}


def _design(name: str, annotations: dict[str, str] | None) -> Design:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}}
    ]
    for team in TEAMS:
        meta: dict[str, Any] = {"name": team}
        if annotations:
            meta["annotations"] = dict(annotations)
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": meta,
                "spec": {
                    "namespaceSelector": {},
                    "cohortName": "gpus",
                    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "h100",
                                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(NOMINAL)}],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "main", "namespace": team},
                "spec": {"clusterQueue": team},
            }
        )
    return Design(name, [manifests.parse_object(doc) for doc in docs])


def _pick(rng: random.Random, table: tuple[tuple[int, int], ...]) -> int:
    return rng.choices([value for value, _ in table], weights=[weight for _, weight in table])[0]


def trace(seed: int, jobs: int = JOBS_PER_WEEK, span: int = WEEK) -> list[Job]:
    """The made week of ``seed``: arrivals uniform over ``span``, deterministic per seed."""
    rng = random.Random(seed)
    out = []
    low, high = math.log(5 * MINUTE), math.log(48 * HOUR)
    for n in range(jobs):
        team = TEAMS[rng.randrange(len(TEAMS))]
        gpus = _pick(rng, SIZES)
        runtime = int(math.exp(rng.uniform(low, high))) // SECOND * SECOND
        limit = None
        if rng.random() < 0.4:
            limit = int(runtime * rng.uniform(1.2, 3.0)) // SECOND * SECOND + SECOND
        checkpoint = None
        if runtime > 2 * HOUR and rng.random() < 0.5:
            checkpoint = rng.choice((30 * MINUTE, HOUR, 2 * HOUR))
        out.append(
            Job(
                name=f"job-{n}",
                namespace=team,
                queue="main",
                submit=rng.randrange(span) // SECOND * SECOND,
                runtime=max(SECOND, runtime),
                pod_sets=(PodSetSpec("main", gpus, {"nvidia.com/gpu": 1000}),),
                priority=_pick(rng, PRIORITIES),
                checkpoint=checkpoint,
                max_execution=limit,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Figures:
    lost_gpu_hours: float
    mean_wait_hours: float
    p99_large_wait_hours: float
    utilisation_percent: float
    preemptions: int


def _p99(values: list[int]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)] / HOUR


def run(design: Design, jobs: list[Job], seed: int) -> Figures:
    checked = design.check(jobs)
    result = driver.simulate(design, checked, driver.Options(seed=seed))
    rec = result.recorder
    totals = result.summary("policy_bench")["totals"]
    waits = list(rec.queued)
    large = [
        rec.queued[i]
        for i, job in enumerate(rec.jobs)
        if job.total_requests().get("nvidia.com/gpu", 0) >= LARGE * 1000
    ]
    return Figures(
        lost_gpu_hours=round(totals["lostResourceHours"].get("nvidia.com/gpu", 0.0), 2),
        mean_wait_hours=round(sum(waits) / len(waits) / HOUR, 3),
        p99_large_wait_hours=round(_p99(large), 3),
        utilisation_percent=float(totals["utilisationPercent"].get("nvidia.com/gpu") or 0.0),
        preemptions=int(totals["preemptions"]),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seeds 1-2 only")
    parser.add_argument("--seed", type=int, help="this seed only")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else [1, 2] if args.quick else [1, 2, 3, 4, 5]
    started = time.perf_counter()
    rows: dict[str, list[Figures]] = {name: [] for name in ARMS}
    for seed in seeds:
        jobs = trace(seed)
        for name, extra in ARMS.items():
            rows[name].append(run(_design(name, extra), jobs, seed))
    means = {name: _mean(figures) for name, figures in rows.items()}
    if args.json:
        print(
            json.dumps(
                {
                    "seeds": seeds,
                    "runs": {k: [f.__dict__ for f in v] for k, v in rows.items()},
                    "means": means,
                },
                indent=2,
            )
        )
    else:
        _print(seeds, rows, means)
    base, policy = means["upstream"], means["cost-aware"]
    ok = (
        policy["lost_gpu_hours"] <= base["lost_gpu_hours"] / 2
        and policy["mean_wait_hours"] <= base["mean_wait_hours"]
    )
    print(
        f"policy_bench: lost GPU-hours {policy['lost_gpu_hours']:.1f} vs upstream {base['lost_gpu_hours']:.1f} "
        f"({_ratio(policy['lost_gpu_hours'], base['lost_gpu_hours'])}), mean wait {policy['mean_wait_hours']:.2f} h "
        f"vs {base['mean_wait_hours']:.2f} h: target (at most half, wait no worse) {'met' if ok else 'NOT met'}; "
        f"{time.perf_counter() - started:.1f} s"
    )
    held = means["reservation"]
    print(
        f"policy_bench: reservations: p99 wait of gangs of {LARGE}+ GPUs {held['p99_large_wait_hours']:.2f} h vs "
        f"upstream {base['p99_large_wait_hours']:.2f} h, utilisation {held['utilisation_percent']:.1f} % vs "
        f"{base['utilisation_percent']:.1f} %, mean wait {held['mean_wait_hours']:.2f} h vs {base['mean_wait_hours']:.2f} h"
    )
    return 0


def _ratio(value: float, base: float) -> str:
    return f"x{value / base:.2f}" if base else "n/a"


def _mean(figures: list[Figures]) -> dict[str, float]:
    names = (
        "lost_gpu_hours",
        "mean_wait_hours",
        "p99_large_wait_hours",
        "utilisation_percent",
        "preemptions",
    )
    return {name: round(sum(getattr(f, name) for f in figures) / len(figures), 3) for name in names}


def _print(seeds: list[int], rows: dict[str, list[Figures]], means: dict[str, dict[str, float]]) -> None:
    header = f"{'policy':<11} {'seed':>4} {'lost GPU-h':>10} {'mean wait h':>11} {'p99 wait >=32 GPUs h':>20} {'util %':>7} {'preempt':>7}"
    print(header)
    for name, figures in rows.items():
        for seed, f in zip(seeds, figures, strict=True):
            print(
                f"{name:<11} {seed:>4} {f.lost_gpu_hours:>10.1f} {f.mean_wait_hours:>11.2f} "
                f"{f.p99_large_wait_hours:>20.2f} {f.utilisation_percent:>7.1f} {f.preemptions:>7}"
            )
        m = means[name]
        print(
            f"{name:<11} {'mean':>4} {m['lost_gpu_hours']:>10.1f} {m['mean_wait_hours']:>11.2f} "
            f"{m['p99_large_wait_hours']:>20.2f} {m['utilisation_percent']:>7.1f} {m['preemptions']:>7.1f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
