"""Invariants over random small traces: work is conserved, capacity is never exceeded."""

from __future__ import annotations

import random

import pytest

from pykueue.sim.jobs import SECOND

from .helpers import cluster_queue, design, run


def random_trace(seed: int) -> str:
    rng = random.Random(seed)
    rows = ["name,submit,queue,priority,runtime,checkpoint,count,requests"]
    for i in range(40):
        queue = rng.choice(["a", "b", "c"])
        checkpoint = rng.choice(["", "", "3", "7"])
        rows.append(
            f"j{i},{rng.randint(0, 60)},{queue}/main,{rng.choice([0, 10, 20])},{rng.randint(1, 20)},"
            f"{checkpoint},{rng.randint(1, 2)},cpu={rng.randint(1, 3)}"
        )
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("seed", range(8))
def test_work_is_conserved_and_capacity_respected(seed):
    cqs = design(
        cluster_queue("a", "4", cohort="pool"),
        cluster_queue("b", "4", cohort="pool", borrowing_limit="2"),
        cluster_queue("c", "2", cohort="pool", within="Never", reclaim="LowerPriority"),
    )
    result = run(cqs, random_trace(seed), seed=seed)
    rec = result.recorder
    assert all(finish >= 0 for finish in rec.finish)  # every job fits the cohort: all finish
    demand = sum(job.total_requests()["cpu"] * job.runtime for job in rec.jobs)
    lost = sum(sum(bucket.values()) for bucket in rec.lost.values())
    used = sum(series.integral.get("cpu", 0) for series in rec.queues.values())
    assert lost > 0  # these traces do preempt, so the conservation below is not trivial
    assert used == demand + lost
    for i, job in enumerate(rec.jobs):
        assert rec.finish[i] - rec.last_admit[i] <= job.runtime
        assert rec.first_admit[i] >= job.submit
        if rec.evictions[i] == 0:
            assert rec.finish[i] - rec.first_admit[i] == job.runtime
            assert rec.lost_time[i] == 0
    # The cohort's 10 CPUs are never exceeded; b never holds more than its 4 + 2.
    moments = sorted({t for series in rec.queues.values() for t in series.times})
    for moment in moments:
        held = {name: rec.on_grid(series, series.used, [moment])[0] for name, series in rec.queues.items()}
        assert sum(held.values()) <= 10_000
        assert held["b"] <= 6_000
    assert rec.end % (SECOND // 1000) == 0
