"""Why a pending workload waits when no scheduling cycle looks at it.

Upstream's workload controller writes ``QuotaReserved=False`` on every pending
workload it reconciles, not only on the heads the scheduler tried; the reasons
come from what blocks the workload, in this order:

    Deactivated      spec.active is false
    Misconfigured    its LocalQueue or ClusterQueue does not exist, its namespace
                     is not selected, its requests are invalid
    Suspended        its LocalQueue is stopped, its ClusterQueue inactive
    AdmissionGated   the kueue.x-k8s.io/admission-gated-by annotation is set

Once nothing blocks it, a reason the scheduler wrote is kept until the next cycle
(upstream's schedulerSetReasons); any other turns PendingEvaluation. A workload
with no condition at all gets none (upstream's UnadmittedWorkloadsExplicitStatus,
off by default, stamps PendingEvaluation on creation).
"""

from __future__ import annotations

from collections.abc import Iterable

from pykueue.engine import evictions, specs
from pykueue.engine.workloads import Workload

# QuotaReserved=False reasons the scheduler writes (upstream's schedulerSetReasons).
SCHEDULER_REASONS = frozenset(
    {
        "WaitingForQuota",
        "NoMatchingFlavor",
        "ExceedsMaxQuota",
        "TopologyPlacementFailed",
        "WaitingForPreemptedWorkloads",
        "WaitingForPodsReady",
        evictions.PENDING_EVALUATION,
    }
)
# Upstream's gate: every pending workload gets QuotaReserved=False at once (Kubernetes mode turns it on).
EXPLICIT_STATUS = "UnadmittedWorkloadsExplicitStatus"
GATED = "AdmissionGated"
GATE_CLEARED_MESSAGE = "AdmissionGatedBy cleared, waiting for quota reservation"
# A twin of a workload that did not fit, parked with it and not tried itself.
BYPASSED_MESSAGE = "Bypassed scheduling evaluation because an equivalent workload recently failed"
NAMESPACE_MISMATCH_MESSAGE = "workload namespace doesn't match ClusterQueue selector"


def blocker(
    wl: Workload,
    lq: specs.LocalQueue | None,
    cq: specs.ClusterQueue | None,
    cq_inactive: bool,
    namespace_labels: dict[str, str],
) -> tuple[str, str] | None:
    """(reason, message) of what keeps ``wl`` from being considered, or None."""
    if not wl.active:
        return evictions.DEACTIVATED, evictions.DEACTIVATED_MESSAGE
    if lq is None:
        return "Misconfigured", f"LocalQueue {wl.queue_name} doesn't exist"
    if lq.stop_policy != "None":
        return "Suspended", f"LocalQueue {wl.queue_name} is inactive"
    if cq is None:
        return "Misconfigured", f"ClusterQueue {lq.cluster_queue} doesn't exist"
    if cq_inactive:
        return "Suspended", f"ClusterQueue {cq.name} is inactive"
    if cq.namespace_selector is None or not cq.namespace_selector.matches(namespace_labels):
        return "Misconfigured", NAMESPACE_MISMATCH_MESSAGE
    if wl.invalid_reason:
        return "Misconfigured", wl.invalid_reason
    if wl.gated_by:
        return GATED, f"Admission is gated by: {wl.gated_by}"
    return None


def twin_reason(twins: Iterable[Workload]) -> str | None:
    """The reason the scheduler gave a parked shape's tried workload, if one of them has it."""
    for twin in twins:
        cond = twin.conditions.get("QuotaReserved")
        tried = cond is not None and cond.status == "False" and cond.reason in SCHEDULER_REASONS
        if tried and cond is not None and cond.reason != evictions.PENDING_EVALUATION:
            return cond.reason
    return None


def explain(wl: Workload, blocked: tuple[str, str] | None, explicit_status: bool, now: int) -> bool:
    """Write ``QuotaReserved=False`` for a pending workload; True when it changed."""
    current = wl.conditions.get("QuotaReserved")
    if blocked is not None:
        reason, message = blocked
    elif current is None:
        if not explicit_status:
            return False
        reason, message = evictions.PENDING_EVALUATION, evictions.PENDING_EVALUATION_MESSAGE
    elif current.status == "False" and current.reason not in SCHEDULER_REASONS:
        reason = evictions.PENDING_EVALUATION
        cleared = current.reason == GATED
        message = GATE_CLEARED_MESSAGE if cleared else evictions.PENDING_EVALUATION_MESSAGE
    else:
        return False
    return evictions.unreserve(wl, reason, message, now)
