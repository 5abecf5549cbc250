"""The Workload status the controller writes: only what the engine decided, nothing for nothing."""

from __future__ import annotations

from pykueue.controllers import workload_status
from pykueue.engine.workloads import Condition, Workload


def _workload() -> Workload:
    return Workload(namespace="ns", name="w", queue_name="lq", pod_sets=[])


def test_a_workload_nothing_happened_to_needs_no_write() -> None:
    # A just-created Workload has no status; the desired one must equal it, or every
    # creation would cost a status write that says nothing.
    assert workload_status.desired_status(_workload(), None) == {}
    assert workload_status.desired_status(_workload(), {}) == {}


def test_conditions_of_other_writers_are_kept_beside_the_engines() -> None:
    wl = _workload()
    wl.conditions["QuotaReserved"] = Condition("QuotaReserved", "False", "Pending", "waiting", 0)
    stored = {"conditions": [{"type": "PodsReady", "status": "False", "reason": "Waiting"}]}
    desired = workload_status.desired_status(wl, stored)
    assert [c["type"] for c in desired["conditions"]] == ["PodsReady", "QuotaReserved"]
    assert desired["conditions"][1]["reason"] == "Pending"


def test_an_emptied_condition_list_is_written_as_empty() -> None:
    # The engine dropped its conditions (a finished re-queue, say): the stored ones go.
    stored = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}]}
    assert workload_status.desired_status(_workload(), stored) == {"conditions": []}
