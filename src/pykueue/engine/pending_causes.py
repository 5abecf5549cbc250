"""Why a workload is not running, as one machine-readable word.

The QuotaReserved condition carries upstream's reason (WaitingForQuota,
NoMatchingFlavor, Suspended, ...) and a sentence. Operators ask a coarser
question: *what would have to change* for this workload to start? The
cause answers it with one word from a closed list, so metrics can count it
per queue and a dashboard can group by it:

    stopped          the workload is deactivated, or its LocalQueue or ClusterQueue is stopped or inactive
    misconfigured    its queue does not exist, or its requests are invalid as written
    policy           an admin's rule keeps it out: the namespace is not selected, admission is gated,
                     or a preemption-cost policy puts off or holds back its preemption
    backoff          it was evicted and waits out its requeue backoff
    admission-check  it holds quota and waits for an admission check to say Ready
    preemption       it has preempted workloads and waits for them to release their quota
    pods-ready       waitForPodsReady: an admitted workload's pods must be ready first
    capacity         it can never fit as requested: it asks for more than the queue's limits
                     (also when upstream only says it waits, but the quota design can never
                     hold it: engine/feasibility.py, "never fits")
    topology         no topology domain can hold it
    flavor           no flavor it tolerates and selects has the resources
    quota            it fits some day, but the quota is in use now
    evaluating       no cycle has tried it yet

A workload parked untried because a twin of the same shape did not fit (upstream's
equivalence hashing) carries no reason of its own: it gets its twin's cause.

The first matching line wins, top to bottom: a stopped queue is the cause
even when quota would also be short. A workload that runs has no cause
(`cause_of` returns None).
"""

from __future__ import annotations

from pykueue.engine import evictions, feasibility, put_offs, waiting
from pykueue.engine.state import State
from pykueue.engine.workloads import CHECK_READY, Workload

STOPPED = "stopped"
MISCONFIGURED = "misconfigured"
POLICY = "policy"
BACKOFF = "backoff"
ADMISSION_CHECK = "admission-check"
PREEMPTION = "preemption"
PODS_READY = "pods-ready"
CAPACITY = "capacity"
TOPOLOGY = "topology"
FLAVOR = "flavor"
QUOTA = "quota"
EVALUATING = "evaluating"

CAUSES = (
    STOPPED,
    MISCONFIGURED,
    POLICY,
    BACKOFF,
    ADMISSION_CHECK,
    PREEMPTION,
    PODS_READY,
    CAPACITY,
    TOPOLOGY,
    FLAVOR,
    QUOTA,
    EVALUATING,
)

# The QuotaReserved=False reasons, by cause. Blockers (waiting.blocker) first, then the scheduler's.
_BY_REASON = {
    evictions.DEACTIVATED: STOPPED,
    "Suspended": STOPPED,
    "AdmissionGated": POLICY,
    "WaitingForPreemptedWorkloads": PREEMPTION,
    "WaitingForPodsReady": PODS_READY,
    "ExceedsMaxQuota": CAPACITY,
    "TopologyPlacementFailed": TOPOLOGY,
    "NoMatchingFlavor": FLAVOR,
    "WaitingForQuota": QUOTA,
    evictions.PENDING_EVALUATION: EVALUATING,
}
# Words of a WaitingForQuota message that say the flavors, not the quota, are what does not fit.
_FLAVOR_WORDS = ("taint", "doesn't match", "does not match", "node affinity", "nodeSelector")
_NAMESPACE_REFUSED = "namespace doesn't match"


def cause_of(state: State, wl: Workload) -> str | None:
    """The cause that keeps ``wl`` from running, or None when it is admitted or finished."""
    if wl.finished:
        return None
    if wl.admission is not None:
        waiting = [c for c in wl.checks.values() if c.state != CHECK_READY]
        return ADMISSION_CHECK if waiting else None
    blocked = state.blocker(wl)
    if blocked is not None:
        return from_reason(*blocked)
    if state.backing_off(wl):
        return BACKOFF
    reserved = wl.conditions.get("QuotaReserved")
    if reserved is None or reserved.status != "False":
        twin = _twin_reason(state, wl)
        return from_reason(twin, "") if twin is not None else EVALUATING
    cause = from_reason(reserved.reason, reserved.message)
    if cause == QUOTA and _never_fits(state, wl):
        return CAPACITY
    return cause


def _never_fits(state: State, wl: Workload) -> bool:
    """Upstream says it waits for quota, but can waiting ever help? (engine/feasibility.py)"""
    return feasibility.never_fits(state, wl)


def _twin_reason(state: State, wl: Workload) -> str | None:
    """The reason of the twin whose failed try parked ``wl`` untried with it (equivalence hashing)."""
    cq = state.route_of(wl)
    queue = state.queues.get(cq) if cq is not None else None
    if queue is None or wl.key not in queue.inadmissible:
        return None
    return waiting.twin_reason(queue.twins(wl))


def from_reason(reason: str, message: str) -> str:
    if reason == "Misconfigured":
        return POLICY if _NAMESPACE_REFUSED in message else MISCONFIGURED
    if put_offs.POLICY_WORDS in message:
        return POLICY  # a preemption-cost policy stops it preempting (engine/put_offs.py)
    cause = _BY_REASON.get(reason, QUOTA)
    if cause == QUOTA and any(word in message for word in _FLAVOR_WORDS):
        return FLAVOR
    return cause


def counts(state: State, cluster_queue: str) -> dict[str, int]:
    """How many of a ClusterQueue's pending workloads wait for each cause (every cause, zeros too)."""
    out = dict.fromkeys(CAUSES, 0)
    queue = state.queues.get(cluster_queue)
    if queue is not None:
        for wl in [*queue.active(), *queue.inadmissible.values()]:
            cause = cause_of(state, wl)
            if cause is not None:
                out[cause] += 1
    for wl in state.admitted.get(cluster_queue, {}).values():
        if cause_of(state, wl) == ADMISSION_CHECK:
            out[ADMISSION_CHECK] += 1
    return out
