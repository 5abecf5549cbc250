"""The SQLite store records every change of a policy object with its write, and only those."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pykueue.errors import NotFound
from pykueue.store.base import SYSTEM_AUTHOR, Manifest, authored_by
from pykueue.store.sqlite import SQLiteStore

NOW = datetime(2026, 12, 1, 19, 30, tzinfo=UTC)


def flavor(name: str, **labels: str) -> Manifest:
    return {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}}


def test_creates_updates_and_deletes_are_recorded_with_who_and_when(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db", now=lambda: NOW)
        with authored_by("alice (uid 1001)"):
            created = await store.create(flavor("a100", zone="a"))
            await store.update({**created, "spec": {"nodeLabels": {"zone": "b"}}})
        await store.delete("ResourceFlavor", "", "a100")
        revisions = store.policy_revisions()
        assert [(r.rev, r.operation, r.who) for r in revisions] == [
            (1, "create", "alice (uid 1001)"),
            (2, "update", "alice (uid 1001)"),
            (3, "delete", SYSTEM_AUTHOR),
        ]
        assert revisions[0].at == "2026-12-01T19:30:00Z"
        assert store.policy_revision(2).as_dict()["diff"] == ['  spec.nodeLabels.zone: "a" -> "b"']
        assert revisions[2].after is None and revisions[2].before is not None
        assert "resourceVersion" not in revisions[2].before["metadata"]
        with pytest.raises(NotFound, match="policy revision 9"):
            store.policy_revision(9)

    asyncio.run(scenario())


def test_status_writes_other_kinds_and_unchanged_specs_are_not_recorded(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        cq = await store.create({"kind": "ClusterQueue", "metadata": {"name": "main"}, "spec": {}})
        cq = await store.update_status({**cq, "status": {"pendingWorkloads": 4}})
        await store.update({**cq, "metadata": {**cq["metadata"], "finalizers": ["x"]}})
        await store.create({"kind": "Job", "metadata": {"name": "j", "namespace": "default"}, "spec": {}})
        assert [r.operation for r in store.policy_revisions()] == ["create"]

    asyncio.run(scenario())


def test_a_failed_transaction_leaves_no_revision(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        with pytest.raises(RuntimeError):
            async with store.transaction():
                await store.create(flavor("a"))
                raise RuntimeError("refused half way")
        assert store.policy_revisions() == []
        await store.create(flavor("b"))
        assert [(r.rev, r.name) for r in store.policy_revisions()] == [(1, "b")]

    asyncio.run(scenario())


def test_filters_and_the_last_n(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        for name in ("a", "b", "c"):
            await store.create(flavor(name))
        await store.create({"kind": "Cohort", "metadata": {"name": "a"}, "spec": {}})
        assert [r.rev for r in store.policy_revisions(limit=2)] == [3, 4]
        assert [r.kind for r in store.policy_revisions(name="a")] == ["ResourceFlavor", "Cohort"]
        assert [r.name for r in store.policy_revisions(kind="ResourceFlavor", after=1)] == ["b", "c"]
        reopened = SQLiteStore(tmp_path / "s.db")
        assert len(reopened.policy_revisions()) == 4

    asyncio.run(scenario())
