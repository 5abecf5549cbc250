"""`KubernetesStore` against the real API server: the `Store` contract, errors, watches, 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from pykueue.errors import AlreadyExists, Conflict, NotFound, ValidationError
from pykueue.store import kubernetes
from pykueue.store.base import WatchEvent

from ..controlplane import KubeCluster

T = TypeVar("T")


def _run(cluster: KubeCluster, body: Callable[[kubernetes.KubernetesStore], Awaitable[T]]) -> T:
    async def go() -> T:
        async with kubernetes.KubernetesStore(kubernetes.load_kubeconfig(cluster.kubeconfig)) as store:
            return await asyncio.wait_for(body(store), timeout=60)

    return asyncio.run(go())


def _limit_range(namespace: str, name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": cpu}}]},
    }


async def _take(events: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    taken = []
    async for event in events:
        taken.append(event)
        if len(taken) == count:
            break
    return taken


def test_crud_and_the_error_tree(kube_apiserver: KubeCluster, kube_namespace: str) -> None:
    async def body(store: kubernetes.KubernetesStore) -> None:
        created = await store.create(_limit_range(kube_namespace, "limits"))
        assert created["kind"] == "LimitRange" and created["metadata"]["resourceVersion"]
        with pytest.raises(AlreadyExists):
            await store.create(_limit_range(kube_namespace, "limits"))
        with pytest.raises(NotFound):
            await store.get("LimitRange", kube_namespace, "nope")
        changed = {**created, "spec": _limit_range(kube_namespace, "limits", "2")["spec"]}
        updated = await store.update(changed)
        with pytest.raises(Conflict):
            await store.update(changed)  # the resourceVersion of `created` is stale now
        items, version = await store.list("LimitRange", kube_namespace)
        assert [i["metadata"]["name"] for i in items] == ["limits"] and items[0]["kind"] == "LimitRange"
        assert int(version) >= int(updated["metadata"]["resourceVersion"])
        await store.delete("LimitRange", kube_namespace, "limits")
        with pytest.raises(NotFound):
            await store.delete("LimitRange", kube_namespace, "limits")

    _run(kube_apiserver, body)


def test_the_api_servers_field_paths_come_back_as_a_validation_error(
    kube_apiserver: KubeCluster, kueue_crds: list[str]
) -> None:
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "store-test-invalid"},
        "spec": {"queueingStrategy": "Sometimes"},
    }

    async def body(store: kubernetes.KubernetesStore) -> None:
        with pytest.raises(ValidationError) as err:
            await store.create(bad)
        assert any("queueingStrategy" in p.path for p in err.value.problems), err.value.problems

    _run(kube_apiserver, body)


def test_update_status_writes_only_the_status(kube_apiserver: KubeCluster, kueue_crds: list[str]) -> None:
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "store-test"},
    }
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "store-test"},
        "spec": {"resourceGroups": []},
    }

    async def body(store: kubernetes.KubernetesStore) -> None:
        await store.create(flavor)
        created = await store.create(cq)
        try:
            written = await store.update_status(
                {**created, "spec": {"cohortName": "ignored"}, "status": {"pendingWorkloads": 3}}
            )
            assert written["status"]["pendingWorkloads"] == 3
            assert "cohortName" not in written["spec"]
        finally:
            await store.delete("ClusterQueue", "", "store-test")
            await store.delete("ResourceFlavor", "", "store-test")

    _run(kube_apiserver, body)


def test_watch_follows_changes_in_order_from_a_version(
    kube_apiserver: KubeCluster, kube_namespace: str
) -> None:
    async def body(store: kubernetes.KubernetesStore) -> None:
        _, since = await store.list("LimitRange", kube_namespace)
        events = store.watch("LimitRange", since)
        first = asyncio.ensure_future(_take(events, 3))
        created = await store.create(_limit_range(kube_namespace, "a"))
        await store.update({**created, "spec": _limit_range(kube_namespace, "a", "3")["spec"]})
        await store.delete("LimitRange", kube_namespace, "a")
        got = await first
        assert [e.type for e in got] == ["ADDED", "MODIFIED", "DELETED"]
        assert all(e.object["metadata"]["name"] == "a" for e in got)
        assert [int(e.resource_version) for e in got] == sorted(int(e.resource_version) for e in got)

    _run(kube_apiserver, body)
