"""Every pending workload gets one machine-readable cause, the first that applies."""

from __future__ import annotations

import copy
from typing import Any

from pykueue.api import manifests
from pykueue.engine import loading, pending_causes, scheduler
from pykueue.engine.state import State

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def _cq(name: str, nominal: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
            }
        ],
        **spec,
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": body,
    }


def _lq(namespace: str, cq: str, stop_policy: str = "None") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": namespace},
        "spec": {"clusterQueue": cq, "stopPolicy": stop_policy},
    }


def _wl(
    name: str, cpu: str, namespace: str = "team", active: bool = True, **annotations: str
) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "queueName": "main",
            "active": active,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


def _state(*docs: dict[str, Any]) -> State:
    state = State()
    for doc in docs:
        loading.apply(state, manifests.parse_object(copy.deepcopy(doc)))
    return state


def _cause(state: State, name: str, namespace: str = "team") -> str | None:
    return pending_causes.cause_of(state, state.workloads[f"{namespace}/{name}"])


def test_a_workload_that_fits_later_waits_for_quota_and_one_too_big_for_the_queue_for_capacity() -> None:
    state = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq"), _wl("first", "3"), _wl("second", "3"))
    assert _cause(state, "first") == pending_causes.EVALUATING
    scheduler.run_cycle(state)
    scheduler.run_cycle(state)
    state.explain_waiting()
    assert _cause(state, "first") is None  # admitted: nothing keeps it
    assert _cause(state, "second") == pending_causes.QUOTA

    big = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq"), _wl("huge", "8"))
    scheduler.run_cycle(big)
    assert _cause(big, "huge") == pending_causes.CAPACITY


def test_a_stopped_queue_or_a_deactivated_workload_is_stopped_before_anything_else() -> None:
    stopped_lq = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq", stop_policy="Hold"), _wl("w", "8"))
    stopped_lq.explain_waiting()
    assert _cause(stopped_lq, "w") == pending_causes.STOPPED

    held_cq = _state(FLAVOR, _cq("cq", "4", stopPolicy="Hold"), _lq("team", "cq"), _wl("w", "1"))
    held_cq.explain_waiting()
    assert _cause(held_cq, "w") == pending_causes.STOPPED

    inactive = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq"), _wl("w", "1", active=False))
    assert _cause(inactive, "w") == pending_causes.STOPPED


def test_missing_queues_are_misconfigured_and_a_refused_namespace_or_a_gate_is_policy() -> None:
    no_lq = _state(FLAVOR, _cq("cq", "4"), _wl("w", "1"))
    assert _cause(no_lq, "w") == pending_causes.MISCONFIGURED

    selective = _cq("cq", "4", namespaceSelector={"matchLabels": {"team": "blue"}})
    refused = _state(FLAVOR, selective, _lq("team", "cq"), _wl("w", "1"))
    assert _cause(refused, "w") == pending_causes.POLICY

    gate = {"kueue.x-k8s.io/admission-gated-by": "example.com/approval"}
    gated = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq"), _wl("w", "1", **gate))
    assert _cause(gated, "w") == pending_causes.POLICY


def test_counts_cover_every_cause_and_add_up_to_the_pending_workloads() -> None:
    state = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq"), _wl("a", "3"), _wl("b", "3"), _wl("c", "9"))
    scheduler.run_cycle(state)
    scheduler.run_cycle(state)
    scheduler.run_cycle(state)
    state.explain_waiting()
    counted = pending_causes.counts(state, "cq")
    assert set(counted) == set(pending_causes.CAUSES)
    assert counted[pending_causes.QUOTA] == 1
    assert counted[pending_causes.CAPACITY] == 1
    assert sum(counted.values()) == 2
    assert sum(pending_causes.counts(state, "no-such-queue").values()) == 0


def test_a_workload_holding_quota_waits_for_its_admission_check() -> None:
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "approval"},
        "spec": {"controllerName": "example.com/approval"},
    }
    state = _state(
        FLAVOR,
        check,
        _cq("cq", "4", admissionChecksStrategy={"admissionChecks": [{"name": "approval"}]}),
        _lq("team", "cq"),
        _wl("w", "1"),
    )
    scheduler.run_cycle(state)
    assert state.workloads["team/w"].admission is not None
    assert _cause(state, "w") == pending_causes.ADMISSION_CHECK
    assert pending_causes.counts(state, "cq")[pending_causes.ADMISSION_CHECK] == 1


def test_an_evicted_workload_in_its_requeue_backoff_is_backoff() -> None:
    state = _state(FLAVOR, _cq("cq", "4"), _lq("team", "cq"), _wl("w", "1"))
    wl = state.workloads["team/w"]
    wl.requeue_at = state.now + 60_000_000
    assert _cause(state, "w") == pending_causes.BACKOFF
    state.now = wl.requeue_at
    assert _cause(state, "w") == pending_causes.EVALUATING


def test_a_twin_parked_untried_with_a_workload_that_did_not_fit_shares_its_cause() -> None:
    state = _state(
        FLAVOR, _cq("cq", "1"), _lq("team", "cq"), _wl("runs", "1"), _wl("tried", "1"), _wl("twin", "1")
    )
    for _ in range(3):
        scheduler.run_cycle(state)
    state.explain_waiting()
    assert state.workloads["team/twin"].conditions.get("QuotaReserved") is None  # never tried itself
    assert _cause(state, "tried") == pending_causes.QUOTA
    assert _cause(state, "twin") == pending_causes.QUOTA
