"""An eviction's two halves, on one workload's status, as upstream writes them.

Upstream evicts in two steps and the engine keeps them apart so that a
controller can wait for the job between them:

    begin      Evicted=True (reason, message), Preempted=True for a preemption,
               the admission checks back to Pending, one more eviction counted in
               schedulingStats. The workload still holds its quota: its job is
               being stopped.
    complete   the job stopped: the reservation is gone. Requeued says whether it
               may be scheduled again (True only after a preemption; False with
               the eviction's reason otherwise, until a backoff ends, a stopped
               queue restarts or the workload is reactivated); QuotaReserved=False
               (PendingEvaluation, the eviction's message; Deactivated for a
               deactivated workload); Admitted=False (NoReservation).

A deactivation is an eviction whose reason is ``Deactivated``, suffixed with
what caused it (``DeactivatedDueToAdmissionCheck``,
``DeactivatedDueToRequeuingLimitExceeded``), as upstream names it.

`State` (`pykueue.engine.state`) owns the quota and the queues around these
two steps; this module only writes status.
"""

from __future__ import annotations

from pykueue.engine import admission_checks, execution_time
from pykueue.engine.config import CREATION_TIMESTAMP, EngineConfig
from pykueue.engine.workloads import Eviction, Workload

PREEMPTED = "Preempted"
DEACTIVATED = "Deactivated"
PODS_READY_TIMEOUT = "PodsReadyTimeout"
ADMISSION_CHECK = "AdmissionCheck"
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
NODE_FAILURES = "NodeFailures"
# A Preempted reason (`pykueue.engine.targets`); the queue order of its victim depends on it.
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

PENDING_EVALUATION = "PendingEvaluation"
PENDING_EVALUATION_MESSAGE = "Workload is pending evaluation in the scheduling queue"
DEACTIVATED_MESSAGE = "The workload is deactivated"
NO_RESERVATION = "NoReservation"
NO_RESERVATION_MESSAGE = "The workload has no reservation"

# Requeued=False reasons a backoff ends (upstream's workload controller flips them to
# True, BackoffFinished, once requeueState.requeueAt has passed).
BACKOFF_REASONS = frozenset({PODS_READY_TIMEOUT, ADMISSION_CHECK})
BACKOFF_FINISHED = "BackoffFinished"
BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"
REACTIVATED = "Reactivated"
REACTIVATED_MESSAGE = "The workload was reactivated"
RESTARTED = {
    CLUSTER_QUEUE_STOPPED: ("ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped"),
    LOCAL_QUEUE_STOPPED: ("LocalQueueRestarted", "The LocalQueue was restarted after being stopped"),
}


def condition_reason(reason: str, underlying_cause: str) -> str:
    """The Evicted condition's reason: a deactivation names its cause."""
    if reason == DEACTIVATED and underlying_cause:
        return f"{DEACTIVATED}DueTo{underlying_cause}"
    return reason


def begin(
    wl: Workload,
    reason: str,
    message: str,
    now: int,
    preempted_reason: str = "",
    underlying_cause: str = "",
) -> Eviction:
    """Mark an admitted workload evicted; it keeps its admission until `complete`."""
    assert wl.admission is not None
    evicted_reason = condition_reason(reason, underlying_cause)
    wl.set_condition("Evicted", "True", evicted_reason, message, now)
    if preempted_reason:
        wl.set_condition(PREEMPTED, "True", preempted_reason, message, now)
        wl.preemption_count += 1
    admission_checks.reset_on_eviction(wl, now)
    stat = (reason, underlying_cause)
    wl.eviction_counts[stat] = wl.eviction_counts.get(stat, 0) + 1
    wl.eviction = Eviction(
        reason=evicted_reason,
        message=message,
        cluster_queue=wl.admission.cluster_queue,
        underlying_cause=underlying_cause,
        requeue=reason in (PREEMPTED, NODE_FAILURES),
    )
    wl.evicted_at = now
    return wl.eviction


def queue_time(wl: Workload, now: int, config: EngineConfig) -> int | None:
    """The time an evicted workload is queued at (`Workload.evicted_at`), or None for its
    creation time, by `EngineConfig.requeue_order` and the eviction's reasons."""
    evicted = wl.conditions.get("Evicted")
    reason = evicted.reason if evicted is not None and evicted.status == "True" else ""
    pods_ready = config.wait_for_pods_ready
    if reason == PODS_READY_TIMEOUT:
        creation = pods_ready is not None and pods_ready.requeuing_timestamp == CREATION_TIMESTAMP
        return None if creation else now
    if config.requeue_order != CREATION_TIMESTAMP or reason == ADMISSION_CHECK:
        return now
    preempted = wl.conditions.get(PREEMPTED)
    if (
        preempted is not None
        and preempted.status == "True"
        and preempted.reason == IN_COHORT_RECLAIM_WHILE_BORROWING
        and not config.gate("PrioritySortingWithinCohort")
    ):
        return preempted.last_transition + 1000  # one millisecond after its preemptor
    return None


def deactivate_pending(wl: Workload, now: int) -> None:
    """A pending workload deactivated: evicted in name only (it holds nothing), as upstream.

    Upstream's eviction of it resets the check states as any eviction does (a check Ready
    or Retry before the reservation goes back to Pending), so a reactivated workload
    passes its checks again.
    """
    wl.requeue_count, wl.requeue_at = 0, None
    evicted = wl.conditions.get("Evicted")
    if evicted is None or evicted.status != "True":
        wl.set_condition("Evicted", "True", DEACTIVATED, DEACTIVATED_MESSAGE, now)
        admission_checks.reset_on_eviction(wl, now)
        stat = (DEACTIVATED, "")
        wl.eviction_counts[stat] = wl.eviction_counts.get(stat, 0) + 1


def complete(wl: Workload, eviction: Eviction, now: int) -> None:
    """The job stopped: write the status of a workload that lost its reservation."""
    wl.set_condition(
        "Requeued", "True" if eviction.requeue else "False", eviction.reason, eviction.message, now
    )
    unreserve(wl, PENDING_EVALUATION, eviction.message, now)
    if not wl.active:
        unreserve(wl, DEACTIVATED, DEACTIVATED_MESSAGE, now)


def unreserve(wl: Workload, reason: str, message: str, now: int) -> bool:
    """QuotaReserved=False with ``reason``, and Admitted in step (upstream's
    UnsetQuotaReservationWithCondition). Returns whether anything changed."""
    execution_time.accumulate(wl, now)
    changed = wl.set_condition("QuotaReserved", "False", reason, message, now)
    return wl.set_condition("Admitted", "False", NO_RESERVATION, NO_RESERVATION_MESSAGE, now) or changed


def backoff_over(wl: Workload, now: int) -> bool:
    """A Requeued=False backoff has run out: Requeued=True, requeueAt cleared.

    Returns whether it changed anything. Reasons other than a backoff's (a stopped
    queue, a deactivation) wait for their own release.
    """
    requeued = wl.conditions.get("Requeued")
    if requeued is None or requeued.status != "False" or requeued.reason not in BACKOFF_REASONS:
        return False
    if wl.requeue_at is not None and now < wl.requeue_at:
        return False
    wl.requeue_at = None
    wl.set_condition("Requeued", "True", BACKOFF_FINISHED, BACKOFF_FINISHED_MESSAGE, now)
    return True


def backoff_ended(wl: Workload, now: int) -> bool:
    """A held workload's backoff is over by ``now`` (Requeued turned True, or only its
    ``requeueAt`` passed, which is then cleared): it goes back to its active queue."""
    if backoff_over(wl, now):
        return True
    if wl.requeue_at is not None and not backing_off(wl, now):
        wl.requeue_at = None
        return True
    return False


def backing_off(wl: Workload, now: int) -> bool:
    """Is the workload in a requeue backoff (upstream's requeueState / Requeued=False)?"""
    requeued = wl.conditions.get("Requeued")
    if requeued is not None and requeued.status == "False":
        return True
    return wl.requeue_at is not None and now < wl.requeue_at


def release(wl: Workload, reasons: tuple[str, ...], new_reason: str, message: str, now: int) -> bool:
    """Requeued=False for one of ``reasons`` becomes True with ``new_reason``."""
    requeued = wl.conditions.get("Requeued")
    if requeued is None or requeued.status != "False":
        return False
    if not any(requeued.reason == r or requeued.reason.startswith(r + "DueTo") for r in reasons):
        return False
    wl.set_condition("Requeued", "True", new_reason, message, now)
    return True


def reset_on_reservation(wl: Workload, now: int) -> None:
    """A new reservation: an Evicted or Preempted condition turns False, as upstream's
    SetQuotaReservation does (reason QuotaReserved, "Previously: " and the old message)."""
    for kind in ("Evicted", PREEMPTED):
        old = wl.conditions.get(kind)
        if old is not None and old.status == "True":
            wl.set_condition(kind, "False", "QuotaReserved", f"Previously: {old.message}", now)
