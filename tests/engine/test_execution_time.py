"""A workload's maximum execution time (engine/execution_time.py): the deadline the controllers
wake up for, the seconds that add up across admissions, what is written back and read again
after a restart, and the Warning event upstream records."""

from __future__ import annotations

from typing import Any

from pykueue.engine import execution_time, lifecycle
from pykueue.engine.specs import LOWER_PRIORITY
from pykueue.reconcilers import events, workload_status

from .builders import NS, SECOND, T0, Cluster, q


def _workload(
    name: str, limit: int | None, *, cpu: str = "4", priority: int = 0, **status: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "cq",
        "priority": priority,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                },
            }
        ],
    }
    if limit is not None:
        spec["maximumExecutionTimeSeconds"] = limit
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    }
    if status:
        doc["status"] = status
    return doc


def _cluster() -> Cluster:
    c = Cluster()
    c.cq("cq", {"f": {"cpu": q(4)}}, within=LOWER_PRIORITY)
    return c


def test_the_deadline_is_the_admission_plus_the_limit_and_wakes_the_controllers() -> None:
    c = _cluster().manifest(_workload("train", 90))
    c.settle()
    assert c.admitted_names() == {"train"}
    assert lifecycle.next_deadline(c.state) == T0 + 90 * SECOND
    lifecycle.advance(c.state, T0 + 90 * SECOND - 1)
    assert c.wl("train").active
    lifecycle.advance(c.state, T0 + 90 * SECOND)
    wl = c.wl("train")
    assert not wl.active and wl.admission is None
    # Cleared when the limit is exceeded, then the eviction adds this admission's 90 s, as upstream.
    assert wl.past_execution_seconds == 90
    assert lifecycle.next_deadline(c.state) is None


def test_a_workload_without_a_limit_has_no_deadline() -> None:
    c = _cluster().manifest(_workload("train", None))
    c.settle()
    assert lifecycle.next_deadline(c.state) is None
    lifecycle.advance(c.state, T0 + 10**6 * SECOND)
    assert c.wl("train").active and c.admitted_names() == {"train"}


def test_each_admission_adds_its_whole_seconds() -> None:
    c = _cluster().manifest(_workload("train", 60))
    c.settle()
    lifecycle.advance(c.state, T0 + 20 * SECOND + SECOND // 2)  # 20.5 s: 20 whole seconds
    c.manifest(_workload("urgent", None, priority=100))
    c.settle()
    assert c.preempted_names() == {"train"}
    assert c.wl("train").past_execution_seconds == 20
    lifecycle.advance(c.state, T0 + 30 * SECOND)
    c.finish("urgent")
    c.settle()
    assert c.admitted_names() == {"train"}
    # 40 s left of 60: due at 70 s, not at 90 s.
    assert lifecycle.next_deadline(c.state) == T0 + 70 * SECOND


def test_the_accumulated_time_is_read_back_after_a_restart() -> None:
    # What upstream's test does by hand: 59 of 60 s used already, then a new reservation.
    c = _cluster().manifest(_workload("train", 60, accumulatedPastExecutionTimeSeconds=59))
    assert c.wl("train").past_execution_seconds == 59
    c.settle()
    assert lifecycle.next_deadline(c.state) == T0 + SECOND


def test_the_status_carries_the_accumulated_time_and_drops_it_when_cleared() -> None:
    c = _cluster().manifest(_workload("train", 60, accumulatedPastExecutionTimeSeconds=7))
    wl = c.wl("train")
    stored = {"accumulatedPastExecutionTimeSeconds": 3}
    assert workload_status.desired_status(wl, stored)["accumulatedPastExecutionTimeSeconds"] == 7
    wl.past_execution_seconds = None
    assert "accumulatedPastExecutionTimeSeconds" not in workload_status.desired_status(wl, stored)


def test_exceeding_records_upstreams_warning_then_the_deactivation() -> None:
    c = _cluster().manifest(_workload("train", 5))
    c.settle()
    c.state.events.clear()
    lifecycle.advance(c.state, T0 + 5 * SECOND)
    described = [kind for event in c.state.events for kind in events.workload_events(event)]
    assert described == [
        (events.WARNING, execution_time.EXCEEDED, "The maximum execution time (5s) exceeded"),
        (
            events.NORMAL,
            "EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded",
            "The workload is deactivated due to exceeding the maximum execution time",
        ),
    ]
