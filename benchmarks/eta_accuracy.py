"""Accuracy of estimated start times on three traces (docs/performance.md, docs/estimates.md).

    python -m benchmarks.eta_accuracy [--every N]

Traces (all deterministic):

* baseline: upstream's scheduler-performance baseline shape
  (../shared/bench/kueue-scheduler-perf/baseline/generator.yaml), reduced to one of
  its five cohorts (the cohorts share nothing, so one behaves as each of them);
  three job classes of fixed length share each LocalQueue.
* gpu-preemption: benchmarks/eta/gpu-queues.yaml (two teams, 8 GPUs each, one
  cohort, StrictFIFO, reclaim and priority preemption), 600 jobs arriving every 25
  minutes on average (about ten days), 70 % of them the research team's; 1-8 GPUs,
  log-normal runtimes per team, a fifth at production priority.
* bursty: the same queues; bursts of 40-80 jobs every 6 hours on a background
  trickle, short and long jobs mixed.

In the two GPU traces 40 % of the jobs declare a time limit
(``maximumExecutionTimeSeconds``), as users do: 1.5 to 4 times what they will run,
rounded up to the next half hour.

A prediction is made at the submission of every ``--every``-th job (default 10);
the errors are |predicted - actual| of the first admission, in seconds. Each trace
is replayed twice: *fresh*, predicting all along as a server that has learned nothing
(declared limits only: what a new server knows), and *learned*, with the running times
of finished jobs learned as they finish (the predictions made before anything was
learned are left out of that row). Coverage is the share of known estimates whose range held the actual
start; "unknown" counts the predictions the estimator declined to make.

``--quick`` (`make bench`) runs the two GPU traces at every 10th job and fails when
the estimator's learned median or p90 error is worse than the naive baseline's.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

from pykueue.sim import eta_replay, generator
from pykueue.sim.design import Design
from pykueue.sim.jobs import SECOND, Job, PodSetSpec

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT.parent / "shared" / "bench" / "kueue-scheduler-perf" / "baseline" / "generator.yaml"
GPU_QUEUES = ROOT / "benchmarks" / "eta" / "gpu-queues.yaml"
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
TEAMS = {  # namespace -> (median runtime, log-normal sigma)
    "research": (2 * HOUR, 0.8),
    "product": (20 * MINUTE, 0.6),
}


def baseline() -> tuple[Design, list[Job]]:
    text = BASELINE.read_text(encoding="utf-8")
    one_cohort = text.replace("    count: 5\n", "    count: 1\n", 1)
    assert one_cohort != text, "the baseline generator no longer has 5 cohorts"
    generated = generator.parse(one_cohort, str(BASELINE))
    return Design("baseline", generated.objects, generated.cq_classes), generated.jobs


def _job(rng: random.Random, number: int, submit: int, team: str, scale: float = 1.0) -> Job:
    median, sigma = TEAMS[team]
    runtime = max(MINUTE, round(median * scale * math.exp(rng.gauss(0, sigma))))
    gpus = rng.choice((1, 1, 2, 2, 4, 8))
    production = rng.random() < 0.2
    limit = None
    if rng.random() < 0.4:  # declared by the user: generous, in half hours
        half_hours = math.ceil(runtime * rng.uniform(1.5, 4.0) / (30 * MINUTE))
        limit = half_hours * 30 * MINUTE
    return Job(
        name=f"job-{number}",
        namespace=team,
        queue="main",
        submit=submit,
        runtime=runtime,
        pod_sets=(PodSetSpec("main", 1, {"cpu": 4000 * gpus, "nvidia.com/gpu": 1000 * gpus}),),
        priority_class="production" if production else "batch",
        job_class="production" if production else "batch",
        max_execution=limit,
    )


def gpu_preemption(seed: int = 1) -> tuple[Design, list[Job]]:
    rng = random.Random(seed)
    jobs, t = [], 0
    for number in range(600):
        t += round(rng.expovariate(1 / (25 * MINUTE)))
        jobs.append(_job(rng, number, t, "research" if rng.random() < 0.7 else "product"))
    return Design.load(GPU_QUEUES, "gpu-preemption"), jobs


def bursty(seed: int = 2) -> tuple[Design, list[Job]]:
    rng = random.Random(seed)
    jobs: list[Job] = []
    for burst in range(6):
        start = burst * 6 * HOUR
        for _ in range(rng.randint(40, 80)):  # a sweep lands at once, within a minute
            jobs.append(_job(rng, len(jobs), start + rng.randrange(MINUTE), "product", scale=0.5))
        t = start
        while t < start + 6 * HOUR:  # a trickle of long jobs in between
            t += round(rng.expovariate(1 / (40 * MINUTE)))
            jobs.append(_job(rng, len(jobs), t, "research"))
    jobs.sort(key=lambda job: job.submit)
    return Design.load(GPU_QUEUES, "bursty"), jobs


TRACES = {"baseline": baseline, "gpu-preemption": gpu_preemption, "bursty": bursty}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--traces", nargs="*", default=list(TRACES))
    parser.add_argument("--quick", action="store_true", help="the two GPU traces only (make bench)")
    args = parser.parse_args()
    names = ["gpu-preemption", "bursty"] if args.quick else args.traces
    print(
        "| trace | phase | predictions (unknown) | median wait | estimator mean / p90 error | range coverage"
        " | naive mean / p90 error |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    worse = 0
    for name in names:
        design, jobs = TRACES[name]()
        started = time.perf_counter()
        fresh = eta_replay.replay(name, design, jobs, every=args.every, learn=False)
        accuracy = eta_replay.replay(name, design, jobs, every=args.every)
        took = time.perf_counter() - started
        for phase, f in (("fresh", fresh.figures("fresh")), ("learned", accuracy.figures("learned"))):
            print(
                f"| {name} ({len(jobs)} jobs, {took:.0f} s) | {phase} | {f['predictions']:.0f} ({f['unknown']:.0f})"
                f" | {_s(f['median_wait'])} | {_s(f['mean_error'])} / {_s(f['p90_error'])}"
                f" | {_pct(f['coverage'])} | {_s(f['naive_mean_error'])} / {_s(f['naive_p90_error'])} |",
                flush=True,
            )
        learned = accuracy.figures("learned")
        worse += learned["median_error"] > learned["naive_median_error"]
        worse += learned["p90_error"] > learned["naive_p90_error"]
    return 1 if worse else 0


def _pct(fraction: float) -> str:
    return "-" if math.isnan(fraction) else f"{100 * fraction:.0f} %"


def _s(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


if __name__ == "__main__":
    raise SystemExit(main())
