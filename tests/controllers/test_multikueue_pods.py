"""The MultiKueue check's controller with a composable kind: which pod Workloads it takes on.

A Workload of plain pods (alone or a group), or of a StatefulSet's pods, is the Pod
adapter's; one whose pods a LeaderWorkerSet made is not (their copies alone could not run
on a worker: the worker's Kueue reads the LeaderWorkerSet), and gets the check Rejected
naming that kind. No worker is reachable here: the Rejected
decision is taken before any dispatch.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pykueue.multikueue import controller as multikueue
from pykueue.reconcilers import integrations
from pykueue.reconcilers.integrations import pod as pods
from pykueue.store.base import Key
from pykueue.store.memory import MemoryStore

NS = "team-a"
CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "mk"},
    "spec": {
        "controllerName": multikueue.CONTROLLER_NAME,
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"},
    },
}


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": {pods.MANAGED_LABEL: "true"},
        },
        "spec": {
            "schedulingGates": [{"name": pods.SCHEDULING_GATE}],
            "containers": [{"name": "c", "image": "i"}],
        },
    }


def _workload(owner_kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "g",
            "namespace": NS,
            "ownerReferences": [{"apiVersion": "v1", "kind": owner_kind, "name": "owner", "uid": "u"}],
        },
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main"}]},
            "admissionChecks": [{"name": "mk", "state": "Pending", "message": ""}],
        },
    }


def _check_after_a_poll(
    owner_kind: str, members: list[dict[str, Any]], check_names: list[str] | None = None
) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        store = MemoryStore()
        await store.create(CHECK)
        workload = await store.create(_workload(owner_kind))
        cache = {Key.of(CHECK): CHECK, Key.of(workload): workload}
        controller = multikueue.MultiKueueController(
            store,
            integrations.registry(("pod", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")),
            cache,
            lambda _: None,
            members=lambda key: members if key == Key.of(workload) else [],
            check_names=None if check_names is None else lambda: check_names,
        )
        await controller.poll()
        await controller.clusters.close()
        stored = await store.get("Workload", NS, "g")
        entry: dict[str, Any] = stored["status"]["admissionChecks"][0]
        return entry

    return asyncio.run(run())


@pytest.mark.parametrize("owner", ["Pod", "StatefulSet"])
def test_a_group_of_plain_pods_or_of_a_statefulsets_is_taken_on_not_rejected(owner: str) -> None:
    entry = _check_after_a_poll(owner, [_pod("g-0"), _pod("g-1")])
    assert entry["state"] == "Pending"


def test_pods_a_leaderworkerset_made_get_the_check_rejected() -> None:
    entry = _check_after_a_poll("LeaderWorkerSet", [_pod("g-0"), _pod("g-1")])
    assert entry["state"] == "Rejected"
    assert entry["message"] == "MultiKueue cannot dispatch the kind LeaderWorkerSet"


def test_with_the_check_names_given_a_poll_looks_only_at_those_checks() -> None:
    # The manager passes the engine's AdmissionCheck names, so a poll does not scan a
    # cache of every Workload: a check it is not told of is not acted on.
    named = _check_after_a_poll("LeaderWorkerSet", [_pod("g-0"), _pod("g-1")], check_names=["mk"])
    assert named["state"] == "Rejected"
    unnamed = _check_after_a_poll("LeaderWorkerSet", [_pod("g-0"), _pod("g-1")], check_names=["other"])
    assert (unnamed["state"], unnamed["message"]) == ("Pending", "")


def test_a_workload_whose_pods_are_not_known_yet_is_left_alone() -> None:
    assert _check_after_a_poll("Pod", [])["state"] == "Pending"


def test_the_workers_are_listed_for_the_kinds_of_the_copies_only() -> None:
    # A StatefulSet's copies are Pods: a worker whose credentials cannot list StatefulSets
    # must not look unreachable.
    registry = integrations.registry(("batch/job", "pod", "statefulset"))
    assert registry.multikueue("StatefulSet") is not None
    assert registry.multikueue_kinds() == ["Job", "Pod"]
