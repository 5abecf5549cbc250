"""Aging: a pending workload's effective priority rises with its wait (docs/governance.md).

A ClusterQueue opts in with the annotation ``pykueue.io/aging`` (`pykueue.api.governance.Aging`):
``rate`` points of priority per wait interval, at most ``cap``, for the workloads whose
priority class (or own priority) the policy names. Everything that orders or compares
priorities — the queue, the cycle's entries, preemption's candidates and policies, fair
sharing's ties — reads ``Workload.priority``, which is the manifest's priority plus
``Workload.aged``; so aging changes nothing but that number.

    pending   aged = min(cap, floor(wait * points / interval)), wait = now - queue time
              (creation, or the last eviction: a preempted workload starts again)
    admitted  the same, the wait counted from its creation: it keeps its seniority while it
              runs, so a workload queued after it never overtakes it by aging (at equal
              rates), and the one that preempted it, queued before its eviction, stays ahead
              of it: aging alone never makes two workloads preempt each other in turn
    no policy aged = 0: upstream's behaviour exactly

`refresh` runs at the start of every cycle and is deterministic: it reads ``state.now``
only. A workload whose aged priority changed moves in its queue, and out of the parked
set (its chances changed, as for an updated workload upstream).
"""

from __future__ import annotations

from pykueue.api.governance import Aging
from pykueue.engine import intake
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload


def refresh(state: State) -> None:
    """Recompute the aged priority of every pending workload of an aging ClusterQueue."""
    if not state.aging_queues and not state.aged_queues:
        return  # no policy anywhere: nothing to look at (upstream's cost)
    for name in sorted(state.aging_queues | state.aged_queues):
        cq = state.cluster_queues.get(name)
        policy = cq.aging if cq is not None else None
        queue = state.queues.get(name)
        if queue is None:
            state.mark_aged(name, False)
            continue
        # Without a policy (it went), this pass takes the aging back.
        state.mark_aged(name, policy is not None)
        for wl in [*queue.active(), *queue.inadmissible.values()]:
            if _age(wl, policy, state.now - wl.queue_order_time()):
                queue.reprioritize(wl, state.backing_off)
        for wl in state.admitted.get(name, {}).values():
            _age(wl, policy, state.now - wl.created)


def _age(wl: Workload, policy: Aging | None, waited: int) -> bool:
    """Set the workload's aged priority; True when it changed."""
    base = wl.priority - wl.aged
    aged = 0
    if policy is not None and policy.applies_to(base, wl.priority_class):
        aged = policy.boost(waited)
    if aged == wl.aged:
        return False
    wl.aged = aged
    wl.priority = base + aged
    wl.shape = intake.shape_of(wl)
    return True


def explain(state: State, wl: Workload) -> str:
    """The aging of one workload in words ("" when its ClusterQueue has no policy)."""
    lq = state.local_queues.get(wl.queue_key)
    cq_name = wl.admission.cluster_queue if wl.admission is not None else (lq.cluster_queue if lq else "")
    cq = state.cluster_queues.get(cq_name)
    policy = cq.aging if cq is not None else None
    if policy is None:
        return ""
    base = wl.priority - wl.aged
    if not policy.applies_to(base, wl.priority_class):
        return f"priority {base}; ClusterQueue {cq_name}'s aging policy does not apply to it"
    since = "since its creation, admitted" if wl.admission is not None else "waiting"
    return (
        f"priority {wl.priority} = {base} + {wl.aged} aged {since} "
        f"({policy.points} per {policy.per // 10**6}s of wait, at most {policy.cap})"
    )


def next_step(state: State) -> int | None:
    """When a pending workload of an aging ClusterQueue next gains a point; None when none will.

    The controllers and the simulator run a pass then (`lifecycle.next_deadline`): a
    starved workload's higher priority may let it preempt, or, under StrictFIFO, put a
    workload that fits at the head, and nothing else would wake the engine on a quiet queue.
    """
    first: int | None = None
    for name in sorted(state.aging_queues):
        cq = state.cluster_queues.get(name)
        policy = cq.aging if cq is not None else None
        queue = state.queues.get(name)
        if policy is None or queue is None:
            continue
        for wl in [*queue.active(), *queue.inadmissible.values()]:
            if wl.aged >= policy.cap or not policy.applies_to(wl.priority - wl.aged, wl.priority_class):
                continue
            # The least wait with floor(wait * points / per) > aged, from the queue time.
            wait = -(-(wl.aged + 1) * policy.per // policy.points)
            at = wl.queue_order_time() + wait
            if at > state.now and (first is None or at < first):
                first = at
    return first
