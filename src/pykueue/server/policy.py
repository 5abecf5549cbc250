"""Standalone policy history and rollback, over the store's recorded revisions.

    history     the store's revisions, filtered by kind and name, the last N
    show        one revision with its readable diff
    rollback    plan: every object changed after REV, as it was at REV (api.policy_history.state_at),
                      minus those that are already so
                what-if: the live engine state played forward with the current and with the
                      planned policies (engine.policy_whatif), in a worker thread
                apply (admins): the planned writes in one store transaction, each checked against
                      the resourceVersion the plan read, recorded as new revisions by the caller

A rollback that would write an object the API refuses today is refused whole, before
anything is written.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from typing import Any

from pykueue.api import manifests, policy_history
from pykueue.engine import forecast, policy_whatif, runtimes
from pykueue.engine.state import State
from pykueue.errors import Conflict, NotFound
from pykueue.server import auth
from pykueue.store.base import Manifest, authored_by

# How far ahead the what-if plays (the forecast's horizon: a week).
HORIZON = forecast.HORIZON


@dataclass
class Step:
    """One write of a rollback: the object as it is and as it is to be (None: absent)."""

    kind: str
    namespace: str
    name: str
    current: Manifest | None
    target: Manifest | None

    @property
    def action(self) -> str:
        if self.target is None:
            return "delete"
        return "create" if self.current is None else "restore"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "action": self.action,
            "diff": policy_history.diff(self.current, self.target),
        }


def history(store: Any, kind: str | None, name: str | None, limit: int | None) -> list[dict[str, Any]]:
    return [r.summary() for r in store.policy_revisions(kind=kind, name=name, limit=limit)]


def show(store: Any, rev: int) -> dict[str, Any]:
    return dict(store.policy_revision(rev).as_dict())


async def plan(store: Any, rev: int) -> list[Step]:
    """The writes that put every policy object back as it was at ``rev``."""
    if rev > 0:
        store.policy_revision(rev)  # NotFound names the revision
    steps = []
    for (kind, namespace, name), target in sorted(
        policy_history.state_at(store.policy_revisions(after=rev), rev).items()
    ):
        try:
            current: Manifest | None = await store.get(kind, namespace, name)
        except NotFound:
            current = None
        if policy_history.normalize(current) != target:
            steps.append(Step(kind, namespace, name, current, target))
    return steps


def _parsed(steps: list[Step], rev: int) -> list[policy_whatif.Change]:
    """The steps as the engine reads them; a target the API refuses today refuses the rollback."""
    return [
        (
            s.kind,
            s.namespace,
            s.name,
            None if s.target is None else manifests.parse_object(s.target, source=f"revision {rev}"),
        )
        for s in steps
    ]


async def rollback(
    store: Any, live: State, model: runtimes.Model, identity: auth.Identity, rev: int, apply: bool
) -> dict[str, Any]:
    steps = await plan(store, rev)
    changes = _parsed(steps, rev)
    # The snapshot and the model are copied on the event loop; the forward runs take a thread.
    snap = forecast.snapshot(live)
    frozen = copy.deepcopy(model)
    differences = await asyncio.to_thread(policy_whatif.compare, snap, frozen, changes, HORIZON)
    results: list[dict[str, str]] = []
    if apply and steps:
        results = await _write(store, identity, steps)
    return {
        "revision": rev,
        "applied": apply and bool(steps),
        "objects": [s.as_dict() for s in steps],
        "differences": [
            {"workload": d.workload, "queue": d.queue, "now": d.now, "afterRollback": d.after}
            for d in differences
        ],
        "results": results,
    }


async def _write(store: Any, identity: auth.Identity, steps: list[Step]) -> list[dict[str, str]]:
    """All the steps in one transaction; an object changed since the plan read it refuses all."""
    results = []
    with authored_by(auth.author(identity)):
        async with store.transaction():
            for step in steps:
                await _check_unchanged(store, step)
                if step.target is None:
                    await store.delete(step.kind, step.namespace, step.name)
                elif step.current is None:
                    await store.create(copy.deepcopy(step.target))
                else:
                    update = copy.deepcopy(step.target)
                    update["metadata"]["resourceVersion"] = step.current["metadata"]["resourceVersion"]
                    await store.update(update)
                results.append({"kind": step.kind, "namespace": step.namespace, "name": step.name})
                results[-1]["action"] = {"delete": "deleted", "create": "created", "restore": "restored"}[
                    step.action
                ]
    return results


async def _check_unchanged(store: Any, step: Step) -> None:
    try:
        now: Manifest | None = await store.get(step.kind, step.namespace, step.name)
    except NotFound:
        now = None
    before = None if step.current is None else step.current["metadata"].get("resourceVersion")
    after = None if now is None else now["metadata"].get("resourceVersion")
    if before != after:
        ref = f"{step.kind}/{step.namespace + '/' if step.namespace else ''}{step.name}"
        raise Conflict(f"{ref} changed while the rollback was planned; nothing was written, try again")
