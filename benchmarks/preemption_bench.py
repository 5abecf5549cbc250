"""Preemption benchmark: a 100-ClusterQueue cohort tree at full usage, 20,000 admitted workloads.

Half of the queues borrow, the other half lend; high-priority workloads arrive
in the lending queues and each needs preemption to reclaim quota. Reports the
time of each preemption decision (the cycle that nominates the arrival and
issues its preemptions) and peak memory. Target (issue 4): median <= 5 ms.
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
from dataclasses import dataclass

from pykueue.engine import scheduler, specs
from pykueue.engine.cohort_tree import Quota
from pykueue.engine.selectors import LabelSelector
from pykueue.engine.state import State
from pykueue.engine.workloads import Admission, PodSet, PodSetAssignment, Workload

SUB_COHORTS = 10
QUEUES_PER_SUB = 10
NOMINAL = 100_000  # 100 CPUs
WORKLOAD_CPU = 500  # half a CPU
ARRIVALS = 200


@dataclass
class Result:
    admitted: int
    decisions_ms: list[float]
    targets: int
    peak_rss_mib: float

    @property
    def median_ms(self) -> float:
        return statistics.median(self.decisions_ms)

    @property
    def p95_ms(self) -> float:
        return statistics.quantiles(self.decisions_ms, n=20)[-1]


def build() -> State:
    state = State()
    state.apply_flavor(specs.ResourceFlavor("default"))
    preemption = specs.Preemption(
        within_cluster_queue=specs.LOWER_PRIORITY,
        reclaim_within_cohort=specs.ANY,
        borrow_within_cohort=specs.LOWER_PRIORITY,
    )
    state.apply_cohort(specs.Cohort("root"))
    for c in range(SUB_COHORTS):
        state.apply_cohort(specs.Cohort(f"org-{c}", parent="root"))
        for q in range(QUEUES_PER_SUB):
            name = f"cq-{c}-{q}"
            state.apply_cluster_queue(
                specs.ClusterQueue(
                    name=name,
                    resource_groups=(specs.ResourceGroup(("cpu",), ("default",)),),
                    quotas={("default", "cpu"): Quota(nominal=NOMINAL)},
                    cohort=f"org-{c}",
                    namespace_selector=LabelSelector(),
                    preemption=preemption,
                )
            )
            state.apply_local_queue(specs.LocalQueue(f"ns-{name}", "main", name))
    seq = 0
    for c in range(SUB_COHORTS):
        for q in range(QUEUES_PER_SUB):
            name = f"cq-{c}-{q}"
            borrower = q % 2 == 0
            count = 300 if borrower else 100  # 150 CPUs or 50 CPUs
            for i in range(count):
                wl = Workload(
                    namespace=f"ns-{name}",
                    name=f"running-{i}",
                    queue_name="main",
                    pod_sets=[PodSet("main", 1, {"cpu": WORKLOAD_CPU})],
                    priority=i % 5,
                    created=seq,
                )
                wl.admission = Admission(
                    name, [PodSetAssignment("main", {"cpu": "default"}, {"cpu": WORKLOAD_CPU}, 1)]
                )
                wl.admitted_at = seq
                seq += 1
                state.add_workload(wl)
    return state


def run() -> Result:
    state = build()
    state.ensure_tree()
    admitted = sum(len(v) for v in state.admitted.values())
    gc.collect()
    gc.freeze()
    decisions: list[float] = []
    targets = 0
    for n in range(ARRIVALS):
        c, q = n % SUB_COHORTS, 1 + 2 * ((n // SUB_COHORTS) % (QUEUES_PER_SUB // 2))
        name = f"cq-{c}-{q}"
        wl = Workload(
            namespace=f"ns-{name}",
            name=f"urgent-{n}",
            queue_name="main",
            pod_sets=[PodSet("main", 1, {"cpu": 4 * WORKLOAD_CPU})],
            priority=100,
            created=10**9 + n,
        )
        wl.shape = ("urgent", n)
        state.add_workload(wl)
        started = time.perf_counter()
        result = scheduler.run_cycle(state)
        decisions.append((time.perf_counter() - started) * 1000)
        targets += len(result.preempted)
        # The victims leave (they would be requeued elsewhere in a real cluster), so each
        # cycle measures exactly one preemption decision; then the arrival is admitted.
        for key in result.preempted:
            state.delete_workload(key)
        scheduler.run_cycle(state)
    return Result(admitted, decisions, targets, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def report(result: Result) -> str:
    return (
        f"preemption: {SUB_COHORTS * QUEUES_PER_SUB} ClusterQueues, {result.admitted} admitted workloads, "
        f"{len(result.decisions_ms)} arrivals needing preemption ({result.targets} targets)\n"
        f"  decision time: median {result.median_ms:.2f} ms, p95 {result.p95_ms:.2f} ms (target median <= 5 ms)\n"
        f"  peak RSS: {result.peak_rss_mib:.0f} MiB"
    )


if __name__ == "__main__":
    print(report(run()))
