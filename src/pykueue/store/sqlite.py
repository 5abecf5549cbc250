"""A `Store` in one SQLite file: standalone mode's durable state.

    counter(version)                        one row: the global resourceVersion, as etcd's revision
    objects(kind, namespace, name, ...)     the current manifest of every object, as JSON
    changes(version, kind, type, body)      every write, in version order: the watch log
    policy_revisions(rev, at, who, ...)     every change of a policy object (api.policy_history),
                                            never trimmed: `pykueue policy history`
    usage_runs(uid, start, finish, body)    the usage ledger: every admission of a Workload,
                                            with the quota it held (api/usage.py, `report usage`)

Every write is one SQLite transaction (``BEGIN IMMEDIATE``): read the stored
row, check the caller's resourceVersion, bump the counter, write the row and
append to the changes log. Either all of it reaches the file or none of it, so
a process killed at any instant leaves the store as it was before or after the
write, never between. The usage ledger is written in the same transaction as the
Workload write that opens or closes a run, so it can never disagree with the objects. `transaction` widens that to several writes (an ``apply
-f`` of many documents): they commit together or not at all.

The file is opened in WAL mode: readers never block the writer and see only
committed data, and writers of several processes queue up on SQLite's lock
(``busy_timeout``) instead of failing. ``synchronous=NORMAL`` keeps every
commit safe across a crash of the process (what standalone mode must survive);
only a power cut may lose the last commits, never corrupt the file.

Watches poll the changes log, so a watcher sees writes made by any process on
the same file; writes made through this very instance wake its watchers at
once instead of at the next poll. Two connections are kept: one for writes
(and reads inside a transaction, which must see their own writes), one for
reads, so a reader never sees another coroutine's uncommitted transaction.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import contextvars
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pykueue.api import policy_history, usage
from pykueue.errors import AlreadyExists, Conflict, NotFound, Unavailable
from pykueue.store.base import EventType, Key, Manifest, WatchEvent, change_author, resource_version
from pykueue.store.memory import NAMESPACED

SCHEMA = """
CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
INSERT OR IGNORE INTO counter (id, version) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    version INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS changes (
    version INTEGER PRIMARY KEY, kind TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_by_kind ON changes (kind, version);
CREATE TABLE IF NOT EXISTS policy_revisions (
    rev INTEGER PRIMARY KEY, at TEXT NOT NULL, who TEXT NOT NULL,
    kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    operation TEXT NOT NULL, before TEXT, after TEXT
);
CREATE INDEX IF NOT EXISTS policy_revisions_by_object ON policy_revisions (kind, name, rev);
CREATE TABLE IF NOT EXISTS usage_runs (
    uid TEXT NOT NULL, start REAL NOT NULL, finish REAL, body TEXT NOT NULL,
    PRIMARY KEY (uid, start)
) WITHOUT ROWID;
"""
BUSY_TIMEOUT_MS = 10_000
POLL_SECONDS = 0.05
WATCH_BATCH = 2000
# The log is trimmed to this many changes when a store opens; a watcher that
# asks for an older version than the log holds gets `Unavailable` and relists.
KEEP_CHANGES = 200_000
TRIM_EVERY = 10_000

# Set while the current task holds this store's transaction (per store: the store's id).
_in_transaction: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "pykueue_sqlite_transaction", default=None
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode: transactions are opened explicitly, so their extent is exactly ours.
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class SQLiteStore:
    """Objects in one SQLite file, with versions, watches and transactions."""

    def __init__(
        self,
        path: str | Path,
        now: Callable[[], datetime] = _utc_now,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._now = now
        self._poll = poll_seconds
        try:
            self._writer = _connect(self.path)
            self._writer.executescript(SCHEMA)
            self._reader = _connect(self.path)
        except sqlite3.Error as exc:
            raise Unavailable(f"cannot open the store {self.path}: {exc}") from exc
        self._trim_log()
        self._lock = asyncio.Lock()
        self._waiters: set[asyncio.Future[None]] = set()

    def close(self) -> None:
        self._writer.close()
        self._reader.close()

    def _trim_log(self) -> None:
        with contextlib.suppress(sqlite3.OperationalError):  # busy: another process trims
            self._writer.execute(
                "DELETE FROM changes WHERE version <= (SELECT version FROM counter) - ?", (KEEP_CHANGES,)
            )

    # ----------------------------------------------------------------- reading

    def _read_conn(self) -> sqlite3.Connection:
        return self._writer if _in_transaction.get() == id(self) else self._reader

    async def get(self, kind: str, namespace: str, name: str) -> Manifest:
        row = (
            self._read_conn()
            .execute(
                "SELECT body FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
                (kind, namespace, name),
            )
            .fetchone()
        )
        if row is None:
            raise NotFound(f"{Key(kind, namespace, name)} not found")
        return json.loads(row[0])  # type: ignore[no-any-return]

    async def list(self, kind: str, namespace: str | None = None) -> tuple[list[Manifest], str]:
        conn = self._read_conn()
        own = conn is self._writer
        if not own:
            conn.execute("BEGIN")  # one snapshot for the rows and the version
        try:
            if namespace is None:
                rows = conn.execute(
                    "SELECT body FROM objects WHERE kind = ? ORDER BY namespace, name", (kind,)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT body FROM objects WHERE kind = ? AND namespace = ? ORDER BY name",
                    (kind, namespace),
                ).fetchall()
            version = conn.execute("SELECT version FROM counter").fetchone()[0]
        finally:
            if not own:
                conn.execute("COMMIT")
        return [json.loads(body) for (body,) in rows], str(version)

    def count(self, kind: str, namespace: str, unowned_only: bool = False) -> int:
        """How many ``kind`` objects ``namespace`` holds (``unowned_only``: without an owner
        reference, i.e. not made by a controller for another object); no body is decoded."""
        query = "SELECT COUNT(*) FROM objects WHERE kind = ? AND namespace = ?"
        if unowned_only:
            query += " AND json_extract(body, '$.metadata.ownerReferences') IS NULL"
        return int(self._read_conn().execute(query, (kind, namespace)).fetchone()[0])

    # ----------------------------------------------------------------- writing

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[SQLiteStore]:
        """Writes made inside commit together at the end, or not at all if it raises."""
        if _in_transaction.get() == id(self):
            yield self  # nested: part of the outer transaction
            return
        async with self._lock:
            self._begin()
            token = _in_transaction.set(id(self))
            try:
                yield self
            except BaseException:
                self._writer.execute("ROLLBACK")
                raise
            else:
                self._writer.execute("COMMIT")
                self._notify()
            finally:
                _in_transaction.reset(token)

    def _begin(self) -> None:
        try:
            self._writer.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise Unavailable(f"the store {self.path} is busy: {exc}") from exc

    async def _write(self, op: Callable[[], Manifest | None]) -> Manifest | None:
        if _in_transaction.get() == id(self):
            return op()
        async with self._lock:
            self._begin()
            try:
                result = op()
            except BaseException:
                self._writer.execute("ROLLBACK")
                raise
            self._writer.execute("COMMIT")
        self._notify()
        return result

    async def create(self, obj: Manifest) -> Manifest:
        stored: Manifest = json.loads(json.dumps(obj))
        key = Key.of(stored)
        if not key.name:
            raise NotFound("an object needs metadata.name")
        meta = stored.setdefault("metadata", {})
        if key.kind in NAMESPACED and not meta.get("namespace"):
            meta["namespace"] = "default"
            key = Key.of(stored)

        def op() -> Manifest:
            if self._row(key) is not None:
                raise AlreadyExists(f"{key} already exists")
            meta["uid"] = meta.get("uid") or str(uuid.uuid4())
            meta.setdefault("creationTimestamp", self._now().strftime("%Y-%m-%dT%H:%M:%SZ"))
            meta["generation"] = 1
            meta.pop("resourceVersion", None)
            return self._put(key, stored, "ADDED")

        result = await self._write(op)
        assert result is not None
        return result

    async def update(self, obj: Manifest) -> Manifest:
        def op() -> Manifest:
            key, current = self._current(obj)
            stored: Manifest = json.loads(json.dumps(obj))
            stored["status"] = current.get("status", {})
            meta = stored.setdefault("metadata", {})
            for field in ("uid", "creationTimestamp", "generation"):
                if field in current["metadata"]:
                    meta[field] = current["metadata"][field]
            if _spec_of(stored) != _spec_of(current):
                meta["generation"] = int(current["metadata"].get("generation", 1)) + 1
            return self._put(key, stored, "MODIFIED", current)

        result = await self._write(op)
        assert result is not None
        return result

    async def update_status(self, obj: Manifest) -> Manifest:
        status = json.loads(json.dumps(obj.get("status", {})))

        def op() -> Manifest:
            key, current = self._current(obj)
            before = {**current, "status": current.get("status")}  # a shallow copy: the status is replaced
            current["status"] = status
            return self._put(key, current, "MODIFIED", before)

        result = await self._write(op)
        assert result is not None
        return result

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        key = Key(kind, namespace, name)

        def op() -> None:
            row = self._row(key)
            if row is None:
                raise NotFound(f"{key} not found")
            version = self._bump()
            obj = json.loads(row)
            self._record_policy(key, obj, None)
            if key.kind == "Workload":
                self._record_usage(obj, None)
            obj["metadata"]["resourceVersion"] = str(version)
            self._writer.execute(
                "DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
                (key.kind, key.namespace, key.name),
            )
            self._log(version, key.kind, "DELETED", json.dumps(obj))

        await self._write(op)

    # Helpers below run inside an open write transaction on the writer connection.

    def _row(self, key: Key) -> str | None:
        row = self._writer.execute(
            "SELECT body FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
            (key.kind, key.namespace, key.name),
        ).fetchone()
        return None if row is None else str(row[0])

    def _current(self, obj: Manifest) -> tuple[Key, Manifest]:
        key = Key.of(obj)
        row = self._row(key)
        if row is None:
            raise NotFound(f"{key} not found")
        current: Manifest = json.loads(row)
        wanted = resource_version(obj)
        if wanted and wanted != resource_version(current):
            raise Conflict(f"{key}: the object has been modified (resourceVersion {wanted} is stale)")
        return key, current

    def _bump(self) -> int:
        self._writer.execute("UPDATE counter SET version = version + 1 WHERE id = 1")
        return int(self._writer.execute("SELECT version FROM counter").fetchone()[0])

    def _put(self, key: Key, stored: Manifest, event: EventType, before: Manifest | None = None) -> Manifest:
        """Write ``stored`` over ``before`` (None: a new object)."""
        if policy_history.is_policy(key.kind):
            previous = self._row(key)
            self._record_policy(key, None if previous is None else json.loads(previous), stored)
        if key.kind == "Workload":
            self._record_usage(before, stored)
        version = self._bump()
        stored["metadata"]["resourceVersion"] = str(version)
        body = json.dumps(stored, separators=(",", ":"))
        self._writer.execute(
            "INSERT OR REPLACE INTO objects (kind, namespace, name, version, body) VALUES (?, ?, ?, ?, ?)",
            (key.kind, key.namespace, key.name, version, body),
        )
        self._log(version, key.kind, event, body)
        return json.loads(body)  # type: ignore[no-any-return]

    def _record_policy(self, key: Key, before: Manifest | None, after: Manifest | None) -> None:
        """A revision for a change of a policy object, in the write's own transaction.

        Recorded here, under every write path, so that no change of a policy object is
        ever stored without its revision, nor a revision without its change.
        """
        if not policy_history.is_policy(key.kind):
            return
        at = self._now().strftime("%Y-%m-%dT%H:%M:%SZ")
        found = policy_history.revision(0, at, change_author.get(), before, after)
        if found is None:
            return  # status, bookkeeping or an identical apply: not a policy change
        self._writer.execute(
            "INSERT INTO policy_revisions (at, who, kind, namespace, name, operation, before, after)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                found.at,
                found.who,
                found.kind,
                found.namespace,
                found.name,
                found.operation,
                None if found.before is None else json.dumps(found.before, sort_keys=True),
                None if found.after is None else json.dumps(found.after, sort_keys=True),
            ),
        )

    def _log(self, version: int, kind: str, event: str, body: str) -> None:
        self._writer.execute(
            "INSERT INTO changes (version, kind, type, body) VALUES (?, ?, ?, ?)",
            (version, kind, event, body),
        )
        if version % TRIM_EVERY == 0:
            # A long-running server trims as it goes, in the same transaction.
            self._writer.execute("DELETE FROM changes WHERE version <= ?", (version - KEEP_CHANGES,))

    def _record_usage(self, before: Manifest | None, after: Manifest | None) -> None:
        """Open or close the ledger's runs this Workload write implies (inside its transaction)."""
        for run in usage.transition(before, after, self._now().timestamp()):
            self._writer.execute(
                "INSERT OR REPLACE INTO usage_runs (uid, start, finish, body) VALUES (?, ?, ?, ?)",
                (run.uid, run.start, run.end, json.dumps(run.to_json(), separators=(",", ":"))),
            )

    def usage_runs(self, since: float, until: float) -> builtins.list[usage.Run]:
        """The ledger's runs that held quota at some time in [since, until], oldest first."""
        rows = self._read_conn().execute(
            "SELECT body FROM usage_runs WHERE start <= ? AND (finish IS NULL OR finish >= ?) ORDER BY start, uid",
            (until, since),
        )
        return [usage.Run.from_json(json.loads(body)) for (body,) in rows.fetchall()]

    # ---------------------------------------------------------------- watching

    def _notify(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_for_change(self) -> None:
        # A plain future resolved by a write or by a timer: unlike asyncio.wait_for (3.11),
        # a cancellation arriving together with a wake-up is never swallowed.
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.add(waiter)
        timer = loop.call_later(self._poll, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiters.discard(waiter)

    async def watch(self, kind: str, since: str) -> AsyncIterator[WatchEvent]:
        after = int(since or 0)
        oldest = self._reader.execute("SELECT MIN(version) FROM changes").fetchone()[0]
        if oldest is not None and after < oldest - 1:
            raise Unavailable(f"watch of {kind} since {after}: the change log starts at {oldest}; list again")
        while True:
            rows = self._reader.execute(
                "SELECT version, type, body FROM changes WHERE kind = ? AND version > ? ORDER BY version LIMIT ?",
                (kind, after, WATCH_BATCH),
            ).fetchall()
            for version, event, body in rows:
                after = int(version)
                yield WatchEvent(event, json.loads(body), str(version))
            if len(rows) < WATCH_BATCH:
                await self._wait_for_change()

    # ------------------------------------------------------------------ extras

    def version(self) -> str:
        return str(self._reader.execute("SELECT version FROM counter").fetchone()[0])

    def policy_revisions(
        self, kind: str | None = None, name: str | None = None, limit: int | None = None, after: int = 0
    ) -> builtins.list[policy_history.Revision]:
        """Recorded policy changes, oldest first: all after ``after``, or the last ``limit``."""
        where: builtins.list[str] = ["rev > ?"]
        args: builtins.list[object] = [min(after, _MAX_INTEGER)]
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if name:
            where.append("name = ?")
            args.append(name)
        query = (
            f"SELECT {_REVISION_COLUMNS} FROM policy_revisions WHERE {' AND '.join(where)} ORDER BY rev DESC"
        )
        if limit is not None:
            query += f" LIMIT {min(int(limit), _MAX_INTEGER)}"
        rows = self._read_conn().execute(query, args).fetchall()
        return [_revision(row) for row in reversed(rows)]

    def policy_revision(self, rev: int) -> policy_history.Revision:
        if not 0 <= rev <= _MAX_INTEGER:
            raise NotFound(f"policy revision {rev} not found")
        row = (
            self._read_conn()
            .execute(f"SELECT {_REVISION_COLUMNS} FROM policy_revisions WHERE rev = ?", (rev,))
            .fetchone()
        )
        if row is None:
            raise NotFound(f"policy revision {rev} not found")
        return _revision(row)


# SQLite's integers are 64-bit: a larger one given as a parameter raises OverflowError (a 500).
_MAX_INTEGER = 2**63 - 1
_REVISION_COLUMNS = "rev, at, who, kind, namespace, name, operation, before, after"


def _revision(row: tuple[Any, ...]) -> policy_history.Revision:
    rev, at, who, kind, namespace, name, op, before, after = row
    return policy_history.Revision(
        rev=int(rev),
        at=str(at),
        who=str(who),
        kind=str(kind),
        namespace=str(namespace),
        name=str(name),
        operation=op,
        before=None if before is None else json.loads(before),
        after=None if after is None else json.loads(after),
    )


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _spec_of(obj: Manifest) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
