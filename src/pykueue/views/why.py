"""Why a workload does not run, in words: the one source of every view's reasons.

`describe`, `submit`, `get workloads` and the dashboard all show the reasons this module
gives, each under one of the engine's cause words (`engine.pending_causes`: quota,
capacity, flavor, policy, stopped, misconfigured, backoff, admission-check, ...), so a
user reads the same word and sentence wherever they look. Reasons come from the live
engine state, and from the stored Workload for what its check controllers wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pykueue.engine import feasibility, pending_causes
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload
from pykueue.store.base import Manifest

Reason = tuple[str, str]  # (cause word, sentence)

NOT_TRIED = "waiting for its turn: the scheduler has not tried it yet"


def check_waited_for(name: str, state: str, message: str = "") -> str:
    """How every view says that a workload waits for one admission check."""
    detail = f"{state}: {message}".rstrip(": ")
    return f"waiting for admission check {name} ({detail})"


def checks_waited_for(stored: Manifest) -> list[str]:
    """`check_waited_for` of each check of a stored Workload that is not Ready yet."""
    return [
        check_waited_for(str(check.get("name")), str(check.get("state")), str(check.get("message") or ""))
        for check in (stored.get("status") or {}).get("admissionChecks", [])
        if check.get("state") != "Ready"
    ]


def reasons(state: State, wl: Workload, stored: Manifest) -> list[Reason]:
    """Why ``wl`` does not run now; empty when it runs (admitted) or has finished."""
    if wl.finished or wl.is_admitted():
        return []
    if wl.admission is not None:
        # Quota reserved, a check not Ready yet: the job does not run.
        checks = [
            check_waited_for(c.name, c.state, c.message) for c in wl.checks.values() if c.state != "Ready"
        ]
        waited = checks or checks_waited_for(stored) or ["waiting for its admission checks"]
        return [(pending_causes.ADMISSION_CHECK, text) for text in waited]
    if not wl.active:
        return [(pending_causes.STOPPED, "spec.active is false: resume the workload to queue it")]
    out = routing_problems(state, wl)
    if state.backing_off(wl):
        out.append((pending_causes.BACKOFF, _backoff_words(wl)))
    reserved = wl.conditions.get("QuotaReserved")
    if reserved is not None and reserved.status == "False" and reserved.message:
        out.append(_categorise(reserved.reason, reserved.message))
        out.extend(design_reasons(state, wl, out[-1][0]))
    out.extend((pending_causes.ADMISSION_CHECK, text) for text in checks_waited_for(stored))
    return out or [(pending_causes.EVALUATING, NOT_TRIED)]


def design_reasons(state: State, wl: Workload, cause: str) -> list[Reason]:
    """Never (the quota design) or not now (the usage), with the numbers (engine/feasibility.py):
    said where the engine's own reason is about quota; a flavor's taints or selectors are
    not weighed there, so a flavor cause gets no verdict."""
    if cause not in (pending_causes.QUOTA, pending_causes.CAPACITY):
        return []
    verdict = feasibility.of(state, wl)
    if verdict is None:
        return []
    return [(pending_causes.CAPACITY if verdict.never else pending_causes.QUOTA, verdict.sentence)]


def routing_problems(state: State, wl: Workload) -> list[Reason]:
    """What is wrong with the way to its ClusterQueue: a queue missing, stopped or inactive."""
    lq = state.local_queues.get(wl.queue_key)
    if lq is None:
        return [(pending_causes.MISCONFIGURED, f"LocalQueue {wl.queue_key} does not exist")]
    if lq.stop_policy != "None":
        return [(pending_causes.STOPPED, f"LocalQueue {wl.queue_key} is stopped ({lq.stop_policy})")]
    if lq.cluster_queue not in state.cluster_queues:
        return [(pending_causes.MISCONFIGURED, f"ClusterQueue {lq.cluster_queue} does not exist")]
    reason = state.inactive_reason.get(lq.cluster_queue, "")
    if not reason:
        return []
    return [
        (pending_causes.STOPPED, f"ClusterQueue {lq.cluster_queue} is inactive: {reason}"),
        *((pending_causes.ADMISSION_CHECK, text) for text in _unanswered_checks(state, lq.cluster_queue)),
    ]


def _unanswered_checks(state: State, cq_name: str) -> list[str]:
    """The ClusterQueue's checks that no controller has marked Active, in words."""
    out = []
    for name in state.cluster_queues[cq_name].admission_checks:
        check = state.admission_checks.get(name)
        if check is not None and not check.active:
            out.append(
                f"waiting for admission check {name}: its controller ({check.controller or 'none named'}) "
                "has not marked it Active; is that controller running?"
            )
    return out


def _categorise(reason: str, message: str) -> Reason:
    """The engine's QuotaReserved=False reason and message, under its cause word."""
    cause = pending_causes.from_reason(reason, message)
    if cause == pending_causes.CAPACITY:
        return (cause, f"can never fit as requested: {message}")
    return (cause, message)


def _backoff_words(wl: Workload) -> str:
    if wl.requeue_at is None:
        return "evicted, and waits to be requeued"
    at = datetime.fromtimestamp(wl.requeue_at / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"evicted, and waits out its requeue backoff until {at}"
