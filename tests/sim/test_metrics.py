"""The figures themselves: Jain's index, percentiles, lost GPU-hours, plan verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykueue.sim import driver, metrics, plan, trace
from pykueue.sim.design import Design

from .helpers import cluster_queue, design, run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1.0, 1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([2.0, 0.0, 0.0, 0.0], 0.25), ([0.0, 0.0], 1.0), ([], None)],
)
def test_jain_index(values, expected):
    assert metrics.jain(values) == expected


def test_nearest_rank_percentiles():
    values = list(range(1, 11))
    assert [metrics.percentile(values, f) for f in (0.5, 0.9, 0.99, 1.0)] == [5, 9, 10, 10]


def test_fairness_drops_when_one_queue_takes_the_cohort():
    # a borrows all 8 CPUs at 0; b's job arrives at 5 but cannot reclaim (reclaimWithinCohort Never):
    # from 5 to 10 both wait-or-run with shares 2 and 0 -> Jain 0.5; before, only a has pending work.
    trace_text = "name,submit,queue,runtime,requests\nhog,0,a/main,10,cpu=8\nhog2,0,a/main,10,cpu=8\nlate,5,b/main,10,cpu=4\n"
    cqs = design(
        cluster_queue("a", "4", cohort="pool", reclaim="Never"),
        cluster_queue("b", "4", cohort="pool", reclaim="Never"),
    )
    result = run(cqs, trace_text)
    rec = result.recorder
    grid = [0, 6_000_000, 12_000_000]
    assert rec.fairness(grid) == [1.0, 0.5, 1.0]


def test_lost_gpu_hours_of_the_example():
    design_ = Design.load(EXAMPLES / "queues.yaml")
    summary = driver.simulate(design_, design_.check(trace.load(EXAMPLES / "trace.csv"))).summary("x")
    # pretrain-2 loses 1200 s on 8 GPUs; sweep-1 loses 1800 s twice on 4 GPUs: 8/3 + 4 = 6.6667 GPU-hours.
    assert summary["clusterQueues"]["research"]["lostResourceHours"]["nvidia.com/gpu"] == 6.6667
    assert summary["totals"]["lostResourceHours"]["nvidia.com/gpu"] == 6.6667
    # finetune-2 was preempted after 30 min with a 15 min checkpoint: nothing lost.
    assert summary["clusterQueues"]["product"]["preemptions"] == 1
    assert summary["clusterQueues"]["product"]["lostResourceHours"]["nvidia.com/gpu"] == 0.0


def test_progress_is_reported():
    design_ = Design.load(EXAMPLES / "queues.yaml")
    calls: list[tuple[int, int, int]] = []
    driver.simulate(
        design_,
        design_.check(trace.load(EXAMPLES / "trace.csv")),
        driver.Options(progress=lambda done, total, now: calls.append((done, total, now)), progress_every=1),
    )
    assert calls[-1] == (8, 8, 25_200_000_000)
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)


@pytest.mark.parametrize(
    ("figure", "base", "value", "expected"),
    [
        ("mean wait (s)", 10.0, 5.0, "better"),
        ("mean wait (s)", 10.0, 12.0, "worse"),
        ("utilisation of nominal cpu (%)", 50.0, 60.0, "better"),
        ("fairness (mean Jain index)", 0.9, 0.8, "worse"),
        ("finished", 8, 7, "worse"),
        ("jobs", 8, 9, ""),
        ("mean wait (s)", 10.0, 10.0, ""),
        ("mean wait (s)", None, 10.0, ""),
    ],
)
def test_plan_verdicts(figure, base, value, expected):
    assert plan.verdict(figure, base, value) == expected
