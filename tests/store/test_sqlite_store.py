"""What only the SQLite store promises: transactions, several processes on one file, crash safety."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykueue.errors import AlreadyExists, Conflict
from pykueue.store.base import Manifest
from pykueue.store.sqlite import SQLiteStore

CHILD = Path(__file__).with_name("writer_child.py")


def queue(name: str, cq: str = "main") -> Manifest:
    return {
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"clusterQueue": cq},
    }


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def spawn(children: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    children.append(proc)
    return proc


def wait_for(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not met before the deadline")


def test_a_transaction_commits_all_or_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        await store.create(queue("taken"))
        with pytest.raises(AlreadyExists):
            async with store.transaction():
                await store.create(queue("new-1"))
                await store.create(queue("new-2"))
                assert (await store.get("LocalQueue", "team-a", "new-1"))["metadata"]["name"] == "new-1"
                await store.create(queue("taken"))  # fails: everything above is undone
        items, _ = await store.list("LocalQueue")
        assert [i["metadata"]["name"] for i in items] == ["taken"]
        async with store.transaction():
            await store.create(queue("new-1"))
            await store.create(queue("new-2"))
        items, _ = await store.list("LocalQueue")
        assert [i["metadata"]["name"] for i in items] == ["new-1", "new-2", "taken"]

    asyncio.run(scenario())


def test_other_readers_do_not_see_an_open_transaction(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        other = SQLiteStore(tmp_path / "s.db")
        async with store.transaction():
            await store.create(queue("pending"))
            items, _ = await other.list("LocalQueue")
            assert items == []
        items, _ = await other.list("LocalQueue")
        assert [i["metadata"]["name"] for i in items] == ["pending"]

    asyncio.run(scenario())


def test_two_connections_writing_the_same_object_one_gets_conflict(tmp_path: Path) -> None:
    async def scenario() -> None:
        a = SQLiteStore(tmp_path / "s.db")
        b = SQLiteStore(tmp_path / "s.db")
        created = await a.create(queue("q"))
        seen_by_b = await b.get("LocalQueue", "team-a", "q")
        await a.update(dict(created, spec={"clusterQueue": "from-a"}))
        with pytest.raises(Conflict):
            await b.update(dict(seen_by_b, spec={"clusterQueue": "from-b"}))
        assert (await b.get("LocalQueue", "team-a", "q"))["spec"]["clusterQueue"] == "from-a"

    asyncio.run(scenario())


def test_two_processes_racing_on_one_version_exactly_one_wins(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "s.db"
    created = asyncio.run(SQLiteStore(db).create(queue("q")))
    version = created["metadata"]["resourceVersion"]
    procs = [spawn(children, str(db), "update", "q", version, f"writer-{i}") for i in range(4)]
    outcomes = sorted(proc.communicate(timeout=60)[0].strip() for proc in procs)
    assert outcomes == ["conflict", "conflict", "conflict", "ok"]
    stored = asyncio.run(SQLiteStore(db).get("LocalQueue", "team-a", "q"))
    assert stored["spec"]["clusterQueue"].startswith("writer-")
    assert int(stored["metadata"]["resourceVersion"]) == int(version) + 1


def test_a_watcher_in_another_process_sees_the_writes(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    since = store.version()
    watcher = spawn(children, str(db), "watch", since, "2")
    assert watcher.stdout is not None
    assert watcher.stdout.readline().strip() == "watching"

    async def writes() -> None:
        created = await store.create(queue("w"))
        await store.delete("LocalQueue", "team-a", created["metadata"]["name"])

    asyncio.run(writes())
    out, err = watcher.communicate(timeout=30)
    assert out.split("\n")[:2] == ["ADDED w", "DELETED w"], err


def test_a_writer_killed_mid_transaction_leaves_nothing_half_written(
    tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    asyncio.run(store.create(queue("before")))
    ready = tmp_path / "ready"
    writer = spawn(children, str(db), "hold-transaction", "50", str(ready))
    wait_for(ready.exists)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=10)
    assert writer.returncode == -signal.SIGKILL

    async def after() -> None:
        fresh = SQLiteStore(db)
        items, version = await fresh.list("LocalQueue")
        assert [i["metadata"]["name"] for i in items] == ["before"]
        assert version == items[0]["metadata"]["resourceVersion"]
        # LocalQueues are policy: their revisions went with the transaction, none is left over.
        assert [(r.rev, r.name) for r in fresh.policy_revisions()] == [(1, "before")]
        # The killed writer's lock is gone: a new write commits at the next version.
        created = await fresh.create(queue("after"))
        assert int(created["metadata"]["resourceVersion"]) == int(version) + 1

    asyncio.run(after())


def test_the_change_log_is_trimmed_and_a_too_old_watch_is_told_to_relist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pykueue.errors import Unavailable
    from pykueue.store import sqlite

    monkeypatch.setattr(sqlite, "TRIM_EVERY", 10)
    monkeypatch.setattr(sqlite, "KEEP_CHANGES", 5)

    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        for i in range(30):
            await store.create(queue(f"q{i}"))
        kept = store._reader.execute("SELECT COUNT(*) FROM changes").fetchone()[0]
        assert kept < 30
        with pytest.raises(Unavailable, match="list again"):
            await anext(store.watch("LocalQueue", "1"))
        items, version = await store.list("LocalQueue")
        assert len(items) == 30  # objects are never trimmed, only their history
        recent = store.watch("LocalQueue", str(int(version) - 1))
        assert (await anext(recent)).object["metadata"]["name"] == "q29"

    asyncio.run(scenario())
