"""`pykueue policy ... --kubeconfig`: the history the controller keeps in a cluster, read directly.

The controller records revisions as ConfigMaps in its namespace (reconcilers.policy_recorder);
these functions read them with the caller's credentials, and a rollback builds the engine
state from a fresh list of the cluster (as the controller does at start), plays the what-if
on it, and with ``apply`` writes the objects as the caller. The controller then sees the
writes on its watches and records them as new revisions. Answers have the shapes the
standalone API gives, so `policy_command` prints both alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from pykueue.api.policy_history import Revision
from pykueue.cli import controller_command
from pykueue.engine import runtimes
from pykueue.errors import NotFound
from pykueue.reconcilers import policy_recorder, policy_rollback
from pykueue.reconcilers.admission import AdmissionController
from pykueue.store.kubernetes import KubernetesStore

T = TypeVar("T")


def _run(kubeconfig: Path, context: str | None, work: Callable[[KubernetesStore], Awaitable[T]]) -> T:
    async def main() -> T:
        store = controller_command.connect(kubeconfig, context)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def history(
    kubeconfig: Path,
    context: str | None,
    namespace: str,
    kind: str | None,
    name: str | None,
    limit: int | None,
) -> list[dict[str, Any]]:
    async def work(store: KubernetesStore) -> list[dict[str, Any]]:
        found = [
            r
            for r in await policy_recorder.load(store, namespace)
            if (not kind or r.kind == kind) and (not name or r.name == name)
        ]
        return [r.summary() for r in (found[-limit:] if limit else found)]

    return _run(kubeconfig, context, work)


def show(kubeconfig: Path, context: str | None, namespace: str, rev: int) -> dict[str, Any]:
    async def work(store: KubernetesStore) -> dict[str, Any]:
        for item in await policy_recorder.load(store, namespace):
            if item.rev == rev:
                return item.as_dict()
        raise NotFound(f"policy revision {rev} not found (in ConfigMaps of namespace {namespace})")

    return _run(kubeconfig, context, work)


def _check_reach(revisions: list[Revision], rev: int, namespace: str) -> None:
    """Refuse a revision whose later history was partly dropped by the retention."""
    kept = {r.rev for r in revisions}
    if rev > 0 and rev not in kept:
        raise NotFound(f"policy revision {rev} not found (in ConfigMaps of namespace {namespace})")
    newest = max(kept, default=0)
    missing = [n for n in range(rev + 1, newest + 1) if n not in kept]
    if missing:
        raise NotFound(
            f"cannot go back to revision {rev}: revision {missing[-1]} after it is no longer kept "
            f"(the oldest revision one can go back to is {missing[-1]})"
        )


def rollback(kubeconfig: Path, context: str | None, namespace: str, rev: int, apply: bool) -> dict[str, Any]:
    async def work(store: KubernetesStore) -> dict[str, Any]:
        revisions = await policy_recorder.load(store, namespace)
        _check_reach(revisions, rev, namespace)
        steps = await policy_rollback.plan(store, revisions, rev)
        # The live state as the controller builds it at start (its default engine settings).
        config = controller_command.engine_config(None, fair_sharing=False, nominal_first=True)
        admission = AdmissionController(store, config)
        await admission.sync()
        differences = await policy_rollback.what_if(admission.state, runtimes.Model(), steps, rev)
        results = await policy_rollback.write(store, steps) if apply and steps else []
        return policy_rollback.report(rev, steps, differences, results)

    return _run(kubeconfig, context, work)
