"""The lost-work and status-lag figures of `make bench-upstream` (issue 46), fed made-up watch records:
benchmarks/upstream_watch.py reads what its watches on Workloads and ClusterQueues saw, the same way
for both controllers, so these pin that reading without an API server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ is not a package of the wheel; the repository's root holds it.
sys.path.insert(0, str(ROOT))

from benchmarks.upstream_watch import (  # noqa: E402
    QueueSeen,
    RunWatch,
    WorkloadSeen,
    lag_summary,
    load,
    lost_work,
    metric_lost_work,
    percentile,
    queue_seen,
    usage_lag,
    workload_seen,
)

CPU = ("default", "cpu")


def wl(t: float, key: str, cpus: float = 0, *, cq: str = "cq-a", flags: str = "") -> WorkloadSeen:
    """A Workload event: flags r(eserved) a(dmitted) e(victed) f(inished); no r or a means no admission."""
    holds = "r" in flags or "a" in flags
    return WorkloadSeen(
        t,
        key,
        cluster_queue=cq if holds else "",
        usage={CPU: round(cpus * 1000)} if holds and cpus else {},
        reserved="r" in flags,
        admitted="a" in flags,
        evicted="e" in flags,
        finished="f" in flags,
    )


def cq(t: float, name: str, cpus: float) -> QueueSeen:
    return QueueSeen(t, name, {CPU: round(cpus * 1000)} if cpus else {})


def test_workload_summary_reads_the_admission_per_flavor_and_the_conditions() -> None:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "ns", "name": "w", "resourceVersion": "7"},
        "status": {
            "admission": {
                "clusterQueue": "cq-a",
                "podSetAssignments": [
                    {"flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "1500m"}, "count": 3},
                    {
                        "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                        "resourceUsage": {"cpu": "2", "memory": "0"},
                    },
                ],
            },
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True"},
                {"type": "Evicted", "status": "False"},
            ],
        },
    }
    seen = workload_seen(obj, 4.0)
    assert seen == WorkloadSeen(4.0, "ns/w", "cq-a", {("on-demand", "cpu"): 3500}, True, True, False, False)
    assert workload_seen(obj, 5.0, deleted=True) == WorkloadSeen(5.0, "ns/w", finished=True)
    # Reserved without an admission (a half-written status) holds nothing.
    del obj["status"]["admission"]
    assert not workload_seen(obj, 6.0).reserved


def test_queue_summary_leaves_zero_totals_out() -> None:
    obj = {
        "metadata": {"name": "cq-a"},
        "status": {
            "flavorsUsage": [
                {
                    "name": "default",
                    "resources": [{"name": "cpu", "total": "2500m"}, {"name": "memory", "total": "0"}],
                }
            ]
        },
    }
    assert queue_seen(obj, 1.0) == QueueSeen(1.0, "cq-a", {("default", "cpu"): 2500})


def test_lost_work_is_each_evictions_resources_times_its_reservation() -> None:
    events = [
        wl(10, "ns/a", 2, flags="ra"),
        wl(11, "ns/a", 2, flags="ra"),  # another write while admitted: the count still starts at 10
        wl(15, "ns/a", 2, flags="rae"),  # evicted after 5 s with 2 CPUs: 10 CPU-s
        wl(15.2, "ns/a", 2, flags="rae"),  # the same eviction seen again
        wl(15.5, "ns/a", flags="e"),  # the runner unsets the reservation
        wl(20, "ns/a", 2, flags="ra"),  # admitted again, the Evicted condition gone
        wl(23, "ns/a", 2, flags="rae"),  # evicted again after 3 s: 6 CPU-s
        wl(24, "ns/a", flags=""),
        wl(12, "ns/b", 5, flags="ra"),
        wl(40, "ns/b", 5, flags="raf"),  # finished: nothing lost
        wl(30, "ns/c", flags="e"),  # evicted before any reservation: counted, nothing lost
        # Evicted and unreserved in one write (pykueue, for a Workload no job owns): 4 CPUs x 2 s.
        wl(50, "ns/d", 4, flags="ra"),
        wl(52, "ns/d", flags="e"),
    ]
    lost = lost_work(reversed(events))  # out of order, as two watch threads may append them
    assert lost.evictions == 4
    assert lost.resource_seconds == {"default/cpu": pytest.approx(24.0)}
    assert lost.of_resource("cpu") == pytest.approx(24.0)
    assert lost.of_resource("memory") == 0.0


def test_status_lag_runs_from_each_change_of_the_truth_to_the_status_agreeing() -> None:
    events = [
        wl(1.0, "ns/a", 2, flags="ra"),  # truth 2
        cq(1.5, "cq-a", 2),  # shown after 0.5 s
        wl(2.0, "ns/b", 2, flags="ra"),  # truth 4
        wl(3.0, "ns/d", 1, flags="ra"),  # truth 5; the status never shows 4
        cq(3.4, "cq-a", 2.5),  # wrong for a while
        cq(3.6, "cq-a", 5),  # agrees: the change at 2.0 waited 1.6 s, the one at 3.0 0.6 s
        cq(4.0, "cq-a", 3),  # moves with no change of the truth: stale, no lag
        cq(4.5, "cq-a", 5),
        wl(5.0, "ns/a", 2, flags="raf"),  # truth 3, never shown before the record ends at 6.0
        wl(2.0, "ns/c", 1, cq="cq-b", flags="ra"),
        cq(2.1, "cq-b", 1),
        cq(6.0, "cq-b", 1),
    ]
    lags = usage_lag(reversed(events))
    assert lags["cq-a"].lags == pytest.approx([0.5, 1.6, 0.6, 1.0])
    assert lags["cq-a"].unresolved == 1
    # Disagreed 1.0-1.5, 2.0-3.6, 4.0-4.5 and 5.0-6.0.
    assert lags["cq-a"].stale_s == pytest.approx(3.6)
    assert lags["cq-b"].lags == pytest.approx([0.1])
    summary = lag_summary(lags)
    assert summary["max"] == 1.6
    assert summary["changes"] == 5
    assert summary["unresolved"] == 1


def test_status_lag_counts_an_admission_only_while_admitted_and_not_finished() -> None:
    events = [
        wl(1.0, "ns/a", 2, flags="r"),  # reserved, not admitted yet: flavorsUsage does not show it
        cq(1.1, "cq-a", 0),
        wl(2.0, "ns/a", 2, flags="ra"),
        cq(2.2, "cq-a", 2),
        wl(3.0, "ns/a", 2, flags="rae"),  # evicted but still admitted: still used
        wl(3.5, "ns/a", flags="e"),  # the reservation unset: released
        cq(3.6, "cq-a", 0),
    ]
    lags = usage_lag(events)
    assert lags["cq-a"].lags == pytest.approx([0.2, 0.1])
    assert lags["cq-a"].unresolved == 0


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([], 50) == 0.0


def test_pykueue_lost_work_metric_is_summed_per_flavor_and_resource() -> None:
    text = "\n".join(
        [
            "# HELP pykueue_preempted_resource_seconds_total Resource-seconds of the runs preemption stopped",
            "# TYPE pykueue_preempted_resource_seconds_total counter",
            'pykueue_preempted_resource_seconds_total{cluster_queue="a",namespace="x",flavor="default",'
            'resource="cpu",replica_role="standalone"} 10.5',
            'pykueue_preempted_resource_seconds_total{cluster_queue="b",namespace="y",flavor="default",'
            'resource="cpu",replica_role="standalone"} 2.0',
            'pykueue_preempted_resource_seconds_created{cluster_queue="b",namespace="y",flavor="default",'
            'resource="cpu",replica_role="standalone"} 1.7e9',
            "",
        ]
    )
    assert metric_lost_work(text) == {"default/cpu": 12.5}


def test_a_saved_record_reads_back_the_same(tmp_path: Path) -> None:
    watch = RunWatch(tmp_path / "kubeconfig")  # not started: no API server needed
    watch.seen.extend([wl(2.0, "ns/a", 2, flags="rae"), cq(1.0, "cq-a", 2), wl(3.0, "ns/a", flags="f")])
    watch.save(tmp_path / "watch.jsonl")
    assert load(tmp_path / "watch.jsonl") == sorted(watch.seen, key=lambda e: e.t)
