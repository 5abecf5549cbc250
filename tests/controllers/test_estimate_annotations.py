"""The estimated-start annotation is written only when the estimate moved meaningfully."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from pykueue.engine import forecast, intake
from pykueue.kube import estimate_annotations
from pykueue.kube.estimate_annotations import ANNOTATION, AnnotationWriter
from pykueue.store import base
from pykueue.store.base import Key, Manifest
from pykueue.store.memory import MemoryStore

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T = intake.micros(NOW)
MINUTE = 60_000_000


def _estimate(minutes: float) -> forecast.Estimate:
    at = T + round(minutes * MINUTE)
    return forecast.Estimate(at, at, at, "default")


async def _store() -> MemoryStore:
    store = MemoryStore(now=lambda: NOW)
    await store.create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team"},
            "spec": {"queueName": "main", "podSets": []},
        }
    )
    return store


async def _written(store: MemoryStore) -> str | None:
    obj = await store.get("Workload", "team", "w")
    text = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
    return None if text is None else json.loads(text)["at"]


def test_written_first_then_only_on_meaningful_moves() -> None:
    async def scenario() -> None:
        store = await _store()

        async def cached(key: Key) -> Manifest:
            return await store.get(key.kind, key.namespace, key.name)

        async def write(minutes: float) -> int:
            obj = await cached(Key("Workload", "team", "w"))
            writer = AnnotationWriter(store, lambda key: obj)
            return await writer.write({"team/w": _estimate(minutes)}, T)

        assert await write(60) == 1  # nothing written yet
        assert await _written(store) == "2026-01-01T13:00:00Z"
        # An hour away: moves up to max(5 min, 10 % of 60 min) = 6 min are not written.
        assert await write(65) == 0
        assert await write(54.5) == 0
        assert await _written(store) == "2026-01-01T13:00:00Z"
        assert await write(67) == 1
        assert await _written(store) == "2026-01-01T13:07:00Z"

    asyncio.run(scenario())


def test_writes_per_refresh_are_capped_soonest_first() -> None:
    async def scenario() -> None:
        store = MemoryStore(now=lambda: NOW)
        for name in ("a", "b", "c"):
            await store.create(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": {"name": name, "namespace": "team"},
                    "spec": {"queueName": "main", "podSets": []},
                }
            )
        objects = {name: await store.get("Workload", "team", name) for name in ("a", "b", "c")}
        writer = AnnotationWriter(store, lambda key: objects[key.name], max_writes=2)
        estimates = {"team/a": _estimate(30), "team/b": _estimate(10), "team/c": _estimate(20)}
        assert await writer.write(estimates, T) == 2
        annotated = {
            name
            for name in ("a", "b", "c")
            if ANNOTATION
            in ((await store.get("Workload", "team", name))["metadata"].get("annotations") or {})
        }
        assert annotated == {"b", "c"}

    asyncio.run(scenario())


def test_annotations_are_written_as_spare_only_requests() -> None:
    class Watching(MemoryStore):
        spare: list[bool] = []

        async def update(self, obj: Manifest) -> Manifest:
            self.spare.append(base.request_spare_only.get())
            return await super().update(obj)

    async def scenario() -> tuple[list[bool], bool]:
        store = Watching(now=lambda: NOW)
        created = await store.create(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "w", "namespace": "team"},
                "spec": {"queueName": "main", "podSets": []},
            }
        )
        assert await AnnotationWriter(store, lambda key: created).write({"team/w": _estimate(60)}, T) == 1
        return store.spare, base.request_spare_only.get()

    spare, after = asyncio.run(scenario())
    assert spare == [True] and after is False  # the caller's own requests are not changed


def test_the_written_estimate_is_read_back_whole_or_not_at_all() -> None:
    def carrying(text: str) -> Manifest:
        return {"metadata": {"annotations": {ANNOTATION: text}}}

    whole = {"at": "2026-01-01T12:00:00Z", "low": "2026-01-01T11:00:00Z", "high": "2026-01-01T13:00:00Z"}
    assert estimate_annotations.written(carrying(json.dumps({**whole, "basis": "learned"}))) == {
        **whole,
        "basis": "learned",
    }
    assert estimate_annotations.written(carrying(json.dumps(whole))) is None  # no basis
    assert estimate_annotations.written(carrying(json.dumps({**whole, "at": "soon", "basis": "x"}))) is None
    assert estimate_annotations.written(carrying("{not json")) is None
    assert estimate_annotations.written({"metadata": {}}) is None
