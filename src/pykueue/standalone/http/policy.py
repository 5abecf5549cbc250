"""Standalone policy history and rollback, over the revisions the SQLite store keeps.

    history     the store's revisions, filtered by kind and name, the last N
    show        one revision with its readable diff
    rollback    reconcilers.policy_rollback: the plan, the what-if on the live engine state,
                and (admins) the writes in one store transaction, as the caller

The store records every write of a policy object, so the rollback's writes are new
revisions made by the caller without anything more here.
"""

from __future__ import annotations

from typing import Any

from pykueue.api import access
from pykueue.engine import runtimes
from pykueue.engine.state import State
from pykueue.reconcilers import policy_rollback
from pykueue.store.base import authored_by
from pykueue.store.sqlite import SQLiteStore


def history(
    store: SQLiteStore, kind: str | None, name: str | None, limit: int | None
) -> list[dict[str, Any]]:
    return [r.summary() for r in store.policy_revisions(kind=kind, name=name, limit=limit)]


def show(store: SQLiteStore, rev: int) -> dict[str, Any]:
    return dict(store.policy_revision(rev).as_dict())


async def rollback(
    store: SQLiteStore, live: State, model: runtimes.Model, identity: access.Identity, rev: int, apply: bool
) -> dict[str, Any]:
    if rev > 0:
        store.policy_revision(rev)  # NotFound names the revision
    steps = await policy_rollback.plan(store, store.policy_revisions(after=rev), rev)
    differences = await policy_rollback.what_if(live, model, steps, rev)
    results: list[dict[str, str]] = []
    if apply and steps:
        with authored_by(access.author(identity)):
            results = await policy_rollback.write(store, steps)
    return policy_rollback.report(rev, steps, differences, results)
