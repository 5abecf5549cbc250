"""objectRetentionPolicies.workloads (reconcilers/retention.py): what is due when, over the memory
store; the real control plane runs it in tests/kube/controller/test_execution_time_and_retention.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pykueue.api import configuration
from pykueue.errors import ValidationError
from pykueue.reconcilers import retention
from pykueue.store.base import WatchEvent
from pykueue.store.memory import MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _workload(name: str, active: bool = True, **conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "team",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": f"job-{name}",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": {"active": active, "queueName": "q", "podSets": []},
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": at}
                for kind, (reason, at) in conditions.items()
            ]
        },
    }


POLICY = retention.Policy(timedelta(seconds=60), timedelta(seconds=30))


def test_finished_workloads_expire_after_finished() -> None:
    due = retention.expiry(POLICY, _workload("a", Finished=("Succeeded", "2026-01-01T00:00:10Z")))
    assert due == (T0 + timedelta(seconds=70), retention.FINISHED)


def test_only_a_deactivation_by_kueue_deletes_the_job() -> None:
    by_kueue = _workload(
        "a", active=False, Evicted=("DeactivatedDueToMaximumExecutionTimeExceeded", "2026-01-01T00:00:10Z")
    )
    assert retention.expiry(POLICY, by_kueue) == (T0 + timedelta(seconds=40), retention.DEACTIVATED)
    by_a_user = _workload("b", active=False, Evicted=("Deactivated", "2026-01-01T00:00:10Z"))
    assert retention.expiry(POLICY, by_a_user) is None
    running = _workload("c", Evicted=("DeactivatedDueToAdmissionCheck", "2026-01-01T00:00:10Z"))
    assert retention.expiry(POLICY, running) is None  # reactivated since: spec.active true again
    unset = retention.Policy(after_finished=timedelta(seconds=60))
    assert retention.expiry(unset, by_kueue) is None


def test_due_deletions_happen_in_time_and_a_changed_workload_is_forgotten() -> None:
    async def run() -> None:
        store = MemoryStore()
        now = [T0 + timedelta(seconds=30)]
        keeper = retention.WorkloadRetention(store, POLICY, lambda: now[0])
        done = _workload("done", Finished=("Succeeded", "2026-01-01T00:00:00Z"))
        later = _workload("later", Finished=("Succeeded", "2026-01-01T00:00:30Z"))
        for obj in (done, later):
            await store.create(obj)
            keeper.handle(WatchEvent("ADDED", obj, ""))
        assert keeper.next_deadline() == T0 + timedelta(seconds=60)
        assert await keeper.reconcile() == 0
        now[0] = T0 + timedelta(seconds=60)
        assert await keeper.reconcile() == 1
        assert [w["metadata"]["name"] for w in (await store.list("Workload"))[0]] == ["later"]
        # Its Finished condition gone (a new run of the same Workload): nothing due any more.
        keeper.handle(WatchEvent("MODIFIED", _workload("later"), ""))
        assert keeper.next_deadline() is None
        now[0] = T0 + timedelta(hours=1)
        assert await keeper.reconcile() == 0

    asyncio.run(run())


def test_the_configuration_refuses_a_bad_duration_with_its_path() -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "objectRetentionPolicies": {"workloads": {"afterFinished": "soon"}},
    }
    with pytest.raises(ValidationError) as refused:
        configuration.parse(doc, "config.yaml")
    assert "objectRetentionPolicies.workloads.afterFinished" in str(refused.value)
