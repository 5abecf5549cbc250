"""Small traces whose outcome is worked out by hand: admission times, waits, preemption losses."""

from __future__ import annotations

import pytest

from pykueue.engine import scheduler
from pykueue.sim import driver
from pykueue.sim.trace import TraceError, parse_csv

from .helpers import cluster_queue, design, run, times

HEADER = "name,submit,queue,priority,runtime,checkpoint,count,requests\n"


def test_fifo_waits_for_quota_to_free():
    # 4 CPUs; three 2-CPU jobs of 10 s: the third starts when the first ends.
    trace = HEADER + (
        "a,0,team/main,0,10,,1,cpu=2\nb,0,team/main,0,10,,1,cpu=2\nc,1,team/main,0,10,,1,cpu=2\n"
    )
    result = run(design(cluster_queue("team", "4")), trace)
    assert times(result, "a") == {"first": 0, "last": 0, "finish": 10, "evictions": 0, "lost": 0}
    assert times(result, "b")["finish"] == 10
    assert times(result, "c") == {"first": 10, "last": 10, "finish": 20, "evictions": 0, "lost": 0}
    summary = result.summary("trace.csv")
    assert summary["totals"]["makespanSeconds"] == 20
    assert summary["totals"]["wait"]["max"] == 9
    assert summary["clusterQueues"]["team"]["wait"]["mean"] == 3  # (0 + 0 + 9) / 3
    # 2 CPUs x (10 + 10 + 10) s over 4 CPUs x 20 s
    assert summary["totals"]["utilisationPercent"]["cpu"] == 75.0


def test_borrowing_then_reclaim_preempts_the_borrower():
    # a (team a, 4 CPU nominal) borrows team b's 4 CPUs; b's job at 30 s reclaims them.
    trace = HEADER + ("big,0,a/main,0,100,,1,cpu=8\nmine,30,b/main,0,10,,1,cpu=4\n")
    cqs = design(cluster_queue("a", "4", cohort="pool"), cluster_queue("b", "4", cohort="pool"))
    result = run(cqs, trace)
    assert times(result, "mine") == {"first": 30, "last": 30, "finish": 40, "evictions": 0, "lost": 0}
    # big loses its 30 s, waits until mine ends, then runs its whole 100 s again.
    assert times(result, "big") == {"first": 0, "last": 40, "finish": 140, "evictions": 1, "lost": 30}
    summary = result.summary("trace.csv")
    assert summary["clusterQueues"]["a"]["preemptions"] == 1
    assert summary["clusterQueues"]["a"]["lostResourceHours"] == {"cpu": round(8 * 30 / 3600, 4)}
    assert summary["checker"]["workloadClasses"]["default"]["totalEvictions"] == 1


@pytest.mark.parametrize(
    ("checkpoint", "lost", "finish"),
    [
        ("", 30, 140),  # no checkpoint: the 30 s are lost, 100 s rerun from 40
        ("20", 10, 120),  # checkpoint at 20 s: 10 s lost, 80 s left from 40
        ("7", 2, 112),  # checkpoints at 7, 14, 21, 28: 2 s lost, 72 s left
        ("45", 30, 140),  # no checkpoint reached yet
    ],
)
def test_priority_preemption_loses_work_since_the_last_checkpoint(checkpoint, lost, finish):
    trace = HEADER + (f"low,0,team/main,0,100,{checkpoint},1,cpu=4\nhigh,30,team/main,10,10,,1,cpu=4\n")
    result = run(design(cluster_queue("team", "4")), trace)
    assert times(result, "high") == {"first": 30, "last": 30, "finish": 40, "evictions": 0, "lost": 0}
    assert times(result, "low") == {"first": 0, "last": 40, "finish": finish, "evictions": 1, "lost": lost}


def test_checkpoints_accumulate_over_several_preemptions():
    # low (checkpoint 20 s, 100 s of work) is preempted at 30 (keeps 20) and again at 75:
    # readmitted at 40 with 80 s left, it reaches 20 + 35 = 55 s of progress at 75 -> keeps 40.
    trace = HEADER + (
        "low,0,team/main,0,100,20,1,cpu=4\n"
        "high1,30,team/main,10,10,,1,cpu=4\n"
        "high2,75,team/main,10,5,,1,cpu=4\n"
    )
    result = run(design(cluster_queue("team", "4")), trace)
    assert times(result, "high2") == {"first": 75, "last": 75, "finish": 80, "evictions": 0, "lost": 0}
    # lost 10 s then 15 s; 60 s of work left from 80.
    assert times(result, "low") == {"first": 0, "last": 80, "finish": 140, "evictions": 2, "lost": 25}


def test_partial_admission_takes_what_fits():
    trace = "name,submit,queue,runtime,count,minCount,requests\nwide,0,team/main,10,8,2,cpu=1\n"
    result = run(design(cluster_queue("team", "3")), trace)
    assert times(result, "wide")["first"] == 0
    assert result.recorder.queues["team"].used[-2] == 3000  # 3 pods of 1 CPU while it ran


def test_upstream_time_to_admission_counts_to_the_last_admission():
    trace = HEADER + ("low,0,team/main,0,100,,1,cpu=4\nhigh,30,team/main,10,10,,1,cpu=4\n")
    summary = run(design(cluster_queue("team", "4")), trace).summary("t")
    # low: created 0, last admitted 40; high: 0 -> (40 + 0) / 2 = 20 s
    assert summary["checker"]["workloadClasses"]["default"]["averageTimeToAdmissionMs"] == 20_000
    assert summary["checker"]["cmd"]["wallMs"] == 140_000


def test_a_cycle_time_admits_one_head_per_queue_per_cycle():
    # With cycles of 1 s: a (t=0), b (t=0.1) and c (t=0.2) in one queue are admitted at 0, 1, 2: the
    # busy scheduler takes one head per queue per cycle; the other queue's job x goes in the first
    # cycle too; d arrives at 3.5 to an idle scheduler and is admitted at once.
    trace = HEADER + (
        "a,0,team/main,0,10,,1,cpu=1\n"
        "b,0.1,team/main,0,10,,1,cpu=1\n"
        "c,0.2,team/main,0,10,,1,cpu=1\n"
        "x,0,other/main,0,10,,1,cpu=1\n"
        "d,3.5,team/main,0,10,,1,cpu=1\n"
    )
    cqs = design(cluster_queue("team", "8"), cluster_queue("other", "8"))
    jobs = cqs.check(parse_csv(trace, "trace.csv"))
    result = driver.simulate(cqs, jobs, driver.Options(cycle_time=1_000_000))
    assert [times(result, name)["first"] for name in "abcxd"] == [0, 1, 2, 0, 3.5]
    assert times(result, "c")["finish"] == 12


def test_jobs_that_can_never_be_admitted_are_reported_unfinished():
    # The queue only selects namespaces labelled team=a; the namespace has no labels.
    queue = cluster_queue("team", "4").replace(
        "namespaceSelector: {}", "namespaceSelector: {matchLabels: {team: a}}"
    )
    result = run(design(queue), HEADER + "a,0,team/main,0,10,,1,cpu=1\n")
    summary = result.summary("t")
    assert summary["totals"]["finished"] == 0
    assert summary["unfinishedJobs"] == ["team/a"]
    assert summary["totals"]["wait"] == {"count": 0}


def test_a_preemption_ping_pong_does_not_hold_the_clock(monkeypatch):
    # An engine that admits and preempts the same workload forever: the driver notes it and moves on.
    # (It stops flapping once time has moved on, so that the run ends.)
    flip = {"admit": True}

    def ping_pong(state):
        if state.now > 0:
            return scheduler.CycleResult(heads=0)
        flip["admit"] = not flip["admit"]
        key = "team/a"
        if flip["admit"]:
            return scheduler.CycleResult(preempted=[key], heads=1)
        return scheduler.CycleResult(admitted=[key], heads=1)

    monkeypatch.setattr(scheduler, "run_cycle", ping_pong)
    result = run(design(cluster_queue("team", "4")), HEADER + "a,0,team/main,0,10,,1,cpu=1\n")
    assert len(result.notes) == 1
    assert result.notes[0].startswith("at t=0s the scheduler went round in circles")
    assert "team/a (51x)" in result.notes[0]
    assert result.summary("t")["notes"] == result.notes
    # The completions its admissions scheduled were voided by its preemptions: no further instant.
    assert result.instants == 1


def test_time_to_last_admission_and_completion_delay_count_the_waits_after_preemptions():
    # low: submitted 0, admitted 0 (wait 0), preempted at 30 and 75, last admitted at 80, done at 140.
    trace = HEADER + (
        "low,0,team/main,0,100,20,1,cpu=4\n"
        "high1,30,team/main,10,10,,1,cpu=4\n"
        "high2,75,team/main,10,5,,1,cpu=4\n"
    )
    summary = run(design(cluster_queue("team", "4")), trace).summary("trace.csv")
    totals = summary["totals"]
    assert totals["wait"]["max"] == 0  # every job started at once
    assert totals["timeToLastAdmission"]["max"] == 80
    # low finished at 140 but would have at 100 alone: 40 s late; the high ones were on time
    assert totals["completionDelay"]["max"] == 40
    assert totals["completionDelay"]["mean"] == round(40 / 3, 3)
    assert summary["clusterQueues"]["team"]["timeToLastAdmission"]["p50"] == 0
    assert summary["classes"]["default"]["completionDelay"]["count"] == 3


def test_each_preemption_is_attributed_to_its_preemptor_and_reason():
    # big (team a) borrows b's quota; mine (team b) reclaims it at 30 (big is done at 140);
    # then wide in a (8 CPUs from 150) is preempted at 160 by a's own higher-priority job.
    trace = HEADER + (
        "big,0,a/main,0,100,,1,cpu=8\n"
        "mine,30,b/main,0,10,,1,cpu=4\n"
        "wide,150,a/main,0,100,,1,cpu=8\n"
        "urgent,160,a/main,10,10,,1,cpu=4\n"
    )
    cqs = design(cluster_queue("a", "4", cohort="pool"), cluster_queue("b", "4", cohort="pool"))
    result = run(cqs, trace)
    rec = result.recorder
    big = next(i for i, job in enumerate(rec.jobs) if job.name == "big")
    (only,) = rec.preempted_by[big]
    assert rec.jobs[only.by].name == "mine"
    assert (only.time, only.reason, only.lost) == (30_000_000, "InCohortReclamation", 30_000_000)
    summary = result.summary("trace.csv")
    assert summary["preemptionsByPreemptor"] == [
        {
            "victim": "a",
            "preemptor": "a",
            "count": 1,
            "reasons": {"InClusterQueue": 1},
            "lostResourceHours": round(8 * 10 / 3600, 4),
        },
        {
            "victim": "a",
            "preemptor": "b",
            "count": 1,
            "reasons": {"InCohortReclamation": 1},
            "lostResourceHours": round(8 * 30 / 3600, 4),
        },
    ]
    assert summary["clusterQueues"]["b"]["preemptionsCaused"] == 1
    assert summary["clusterQueues"]["a"]["preemptionsCaused"] == 1
    assert summary["clusterQueues"]["b"]["lostResourceHoursCaused"] == round(8 * 30 / 3600, 4)


LIMITED = "name,submit,queue,priority,runtime,maxExecutionTime,count,requests\n"


def test_a_job_past_its_maximum_execution_time_is_stopped_and_the_next_one_starts():
    # long needs 100 s but may run 60 s: stopped at 60 (never finished); next starts then.
    trace = (
        LIMITED
        + "long,0,team/main,0,100,60,1,cpu=4\nnext,1,team/main,0,10,,1,cpu=4\nshort,2,team/main,0,10,10,1,cpu=4\n"
    )
    result = run(design(cluster_queue("team", "4")), trace)
    assert times(result, "long")["finish"] == -1
    assert times(result, "next") == {"first": 60, "last": 60, "finish": 70, "evictions": 0, "lost": 0}
    # A job that ends exactly at its limit finished within it.
    assert times(result, "short") == {"first": 70, "last": 70, "finish": 80, "evictions": 0, "lost": 0}
    totals = result.summary("trace.csv")["totals"]
    assert (totals["finished"], totals["unfinished"], totals["exceededMaximumExecutionTime"]) == (2, 1, 1)
    assert totals["exceededResourceHours"] == {"cpu": round(4 * 60 / 3600, 4)}
    queue = result.summary("trace.csv")["clusterQueues"]["team"]
    assert queue["exceededMaximumExecutionTime"] == 1


def test_the_time_admitted_adds_up_across_preemptions_in_whole_seconds():
    # low may be admitted 50 s in all: 30.5 s before high preempts it (30 counted, as upstream
    # truncates each admission), then readmitted at 40.5 it has 20 s left: stopped at 60.5.
    trace = LIMITED + "low,0,team/main,0,100,50,1,cpu=4\nhigh,30.5,team/main,10,10,,1,cpu=4\n"
    result = run(design(cluster_queue("team", "4")), trace)
    assert times(result, "high")["finish"] == 40.5
    low = times(result, "low")
    assert (low["first"], low["last"], low["finish"], low["evictions"]) == (0, 40.5, -1, 1)
    totals = result.summary("trace.csv")["totals"]
    assert totals["exceededMaximumExecutionTime"] == 1
    assert result.summary("trace.csv")["totals"]["makespanSeconds"] == 60.5
    # What its two runs held, all thrown away: 4 CPUs for 30.5 s and for 20 s.
    assert totals["exceededResourceHours"] == {"cpu": round(4 * 50.5 / 3600, 4)}


def test_a_limit_must_be_whole_seconds():
    trace = LIMITED + "odd,0,team/main,0,100,1.5,1,cpu=4\n"
    with pytest.raises(TraceError, match="maxExecutionTime: must be a positive whole number of seconds"):
        run(design(cluster_queue("team", "4")), trace)
