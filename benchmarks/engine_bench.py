"""Engine benchmark: 1,000 ClusterQueues in 10 cohorts, 50,000 pending single-pod workloads.

Reports admissions per second until the engine settles, the time of the first
cycle (1,000 heads) and peak memory. Targets (issue 3): >= 5,000 admissions/s,
<= 100 ms per 1,000-head cycle, <= 1 GiB.
"""

from __future__ import annotations

import gc
import resource
import time
from dataclasses import dataclass

from pykueue.engine import scheduler, specs
from pykueue.engine.cohort_tree import Quota
from pykueue.engine.selectors import LabelSelector
from pykueue.engine.state import State
from pykueue.engine.workloads import PodSet, Workload

COHORTS = 10
QUEUES_PER_COHORT = 100
WORKLOADS_PER_QUEUE = 50
NOMINAL_CPU = 10_000  # 10 CPUs in milli-units


@dataclass
class Result:
    queues: int
    workloads: int
    first_cycle_ms: float
    first_cycle_heads: int
    admissions: int
    cycles: int
    settle_seconds: float
    peak_rss_mib: float

    @property
    def admissions_per_second(self) -> float:
        return self.admissions / self.settle_seconds if self.settle_seconds else 0.0


def build(
    cohorts: int = COHORTS, per_cohort: int = QUEUES_PER_COHORT, per_queue: int = WORKLOADS_PER_QUEUE
) -> State:
    state = State()
    state.apply_flavor(specs.ResourceFlavor("default"))
    everyone = LabelSelector()
    for c in range(cohorts):
        for q in range(per_cohort):
            name = f"cq-{c}-{q}"
            state.apply_cluster_queue(
                specs.ClusterQueue(
                    name=name,
                    resource_groups=(specs.ResourceGroup(("cpu",), ("default",)),),
                    quotas={("default", "cpu"): Quota(nominal=NOMINAL_CPU)},
                    cohort=f"cohort-{c}",
                    namespace_selector=everyone,
                )
            )
            state.apply_local_queue(specs.LocalQueue(f"ns-{c}-{q}", "main", name))
    for i in range(per_queue):
        for c in range(cohorts):
            for q in range(per_cohort):
                wl = Workload(
                    namespace=f"ns-{c}-{q}",
                    name=f"wl-{i}",
                    queue_name="main",
                    pod_sets=[PodSet("main", 1, {"cpu": 1000})],
                    priority=i % 3,
                    created=i,
                )
                wl.shape = (wl.priority, 1000)
                state.add_workload(wl)
    return state


def run() -> Result:
    state = build()
    state.ensure_tree()
    # Long-lived state is moved out of the collector's reach, as the server and
    # the simulator do after loading: a full collection over 50,000 workloads in
    # the middle of a cycle would otherwise dominate its time.
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    first = scheduler.run_cycle(state)
    first_ms = (time.perf_counter() - started) * 1000
    admissions = len(first.admitted)
    cycles = 1
    settle_started = started
    while True:
        result = scheduler.run_cycle(state)
        cycles += 1
        admissions += len(result.admitted)
        if result.heads == 0 or (not result.changed and not any(q.active() for q in state.queues.values())):
            break
        if cycles > 100_000:
            raise RuntimeError("the benchmark did not settle")
    settle_seconds = time.perf_counter() - settle_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Result(
        queues=len(state.cluster_queues),
        workloads=len(state.workloads),
        first_cycle_ms=first_ms,
        first_cycle_heads=first.heads,
        admissions=admissions,
        cycles=cycles,
        settle_seconds=settle_seconds,
        peak_rss_mib=peak,
    )


def report(result: Result) -> str:
    return (
        f"engine: {result.queues} ClusterQueues, {result.workloads} workloads\n"
        f"  first cycle: {result.first_cycle_heads} heads in {result.first_cycle_ms:.1f} ms (target <= 100 ms)\n"
        f"  settled: {result.admissions} admissions in {result.cycles} cycles, {result.settle_seconds:.2f} s "
        f"= {result.admissions_per_second:,.0f} admissions/s (target >= 5,000)\n"
        f"  peak RSS: {result.peak_rss_mib:.0f} MiB (target <= 1024 MiB)"
    )


if __name__ == "__main__":
    print(report(run()))
