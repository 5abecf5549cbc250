"""Rolling the policy objects back to a revision: the plan, its what-if, and its writes.

    plan      every object changed after REV, as it was at REV (api.policy_history.state_at),
              minus those that already are so; each step keeps the object as it is now
    what_if   the live engine state played forward with the current and with the planned
              policies (engine.policy_whatif), in a worker thread
    write     the steps, each checked against the resourceVersion the plan read:
              a store with transactions (standalone's SQLite) commits them together or not
              at all; the API server has none, so there every step is checked first and the
              steps already written are undone when a later one fails

Shared by the standalone server and `pykueue policy rollback --kubeconfig`. A step whose
target the API refuses today refuses the whole rollback, before anything is written.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pykueue.api import manifests, policy_history
from pykueue.api.policy_history import Revision
from pykueue.engine import forecast, policy_whatif, runtimes
from pykueue.engine.state import State
from pykueue.errors import Conflict, NotFound, PykueueError
from pykueue.store.base import Manifest

log = logging.getLogger(__name__)

HORIZON = forecast.HORIZON  # how far ahead the what-if plays: a week
ACTIONS = {"delete": "deleted", "create": "created", "restore": "restored"}


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

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "action": self.action,
            "diff": policy_history.diff(self.current, self.target),
        }


async def _current(store: Any, kind: str, namespace: str, name: str) -> Manifest | None:
    try:
        found: Manifest = await store.get(kind, namespace, name)
    except NotFound:
        return None
    return found


async def plan(store: Any, revisions: Iterable[Revision], rev: int) -> list[Step]:
    """The writes that put every policy object back as it was at ``rev``."""
    steps = []
    for (kind, namespace, name), target in sorted(policy_history.state_at(revisions, rev).items()):
        current = await _current(store, kind, namespace, name)
        if policy_history.normalize(current) != target:
            steps.append(Step(kind, namespace, name, current, target))
    return steps


def changes(steps: list[Step], rev: int) -> list[policy_whatif.Change]:
    """The steps as the engine reads them; raises ValidationError for a target refused today."""
    return [
        (
            s.kind,
            s.namespace,
            s.name,
            None if s.target is None else manifests.parse_object(s.target, source=f"revision {rev}"),
        )
        for s in steps
    ]


async def what_if(live: State, model: runtimes.Model, steps: list[Step], rev: int) -> list[dict[str, str]]:
    """Workloads whose fate differs under the planned policies (the live state is only copied)."""
    planned = changes(steps, rev)
    # The snapshot and the model are copied on the event loop; the forward runs take a thread.
    snap = forecast.snapshot(live)
    frozen = copy.deepcopy(model)
    found = await asyncio.to_thread(policy_whatif.compare, snap, frozen, planned, HORIZON)
    return [{"workload": d.workload, "queue": d.queue, "now": d.now, "afterRollback": d.after} for d in found]


def report(
    rev: int, steps: list[Step], differences: list[dict[str, str]], results: list[dict[str, str]]
) -> dict[str, Any]:
    """The answer both modes give: the plan, its diffs, the what-if, and what was written."""
    return {
        "revision": rev,
        "applied": bool(results),
        "objects": [s.as_dict() for s in steps],
        "differences": differences,
        "results": results,
    }


async def write(store: Any, steps: list[Step]) -> list[dict[str, str]]:
    """Write every step, all or nothing; Conflict if an object changed since the plan read it."""
    transaction = getattr(store, "transaction", None)
    if transaction is not None:
        async with transaction():
            for step in steps:
                await _check_unchanged(store, step)
                await _write_step(store, step)
        return [_result(s) for s in steps]
    for step in steps:
        await _check_unchanged(store, step)
    done: list[Step] = []
    try:
        for step in steps:
            await _write_step(store, step)
            done.append(step)
    except PykueueError:
        await _undo(store, done)
        raise
    return [_result(s) for s in steps]


async def _check_unchanged(store: Any, step: Step) -> None:
    now = await _current(store, step.kind, step.namespace, step.name)
    before = None if step.current is None else step.current["metadata"].get("resourceVersion")
    after = None if now is None else now["metadata"].get("resourceVersion")
    if before != after:
        raise Conflict(f"{step.ref} changed while the rollback was planned; nothing was written, try again")


async def _write_step(store: Any, step: Step) -> None:
    if step.target is None:
        await store.delete(step.kind, step.namespace, step.name)
    elif step.current is None:
        await store.create(copy.deepcopy(step.target))
    else:
        update = copy.deepcopy(step.target)
        update["metadata"]["resourceVersion"] = step.current["metadata"]["resourceVersion"]
        await store.update(update)


async def _undo(store: Any, done: list[Step]) -> None:
    """Put back what a failed rollback already wrote (no transactions on the API server)."""
    for step in reversed(done):
        try:
            if step.current is None:
                await store.delete(step.kind, step.namespace, step.name)
                continue
            back = policy_history.normalize(step.current)
            assert back is not None
            now = await _current(store, step.kind, step.namespace, step.name)
            if now is None:
                await store.create(back)
            else:
                back["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"]
                await store.update(back)
        except PykueueError as exc:
            log.error("could not undo the rollback's write of %s: %s", step.ref, exc)


def _result(step: Step) -> dict[str, str]:
    return {"kind": step.kind, "namespace": step.namespace, "name": step.name, "action": ACTIONS[step.action]}
