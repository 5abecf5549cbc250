"""waitForPodsReady: the PodsReady condition, its timeouts and the requeue backoff.

Upstream's job reconciler keeps a ``PodsReady`` condition on every admitted
workload; its workload controller evicts an admitted workload that does not
reach it in time. The engine does both from what the controllers report (pods
ready, pods not ready), on its injected clock:

    Admitted=True           PodsReady False, WaitForStart: the timeout runs from
                            the Admitted transition
    pods ready              PodsReady True, Started (Recovered after a recovery)
    pods not ready again    PodsReady False, WaitForRecovery: the recovery
                            timeout runs from this transition
    a timeout passes        evicted, reason PodsReadyTimeout (underlying cause
                            WaitForStart or WaitForRecovery), requeueState.count
                            + 1, requeueAt = now + backoff; past
                            backoffLimitCount deactivated instead
                            (RequeuingLimitExceeded)

The backoff is upstream's ``base * 2^(count-1)`` capped at ``backoffMaxSeconds``,
without its random jitter of at most 0.01 % (the engine is deterministic).
"""

from __future__ import annotations

from pykueue.engine.config import WaitForPodsReady
from pykueue.engine.workloads import Workload

PODS_READY = "PodsReady"
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"
TIMEOUT_REASON = "PodsReadyTimeout"
LIMIT_EXCEEDED = "RequeuingLimitExceeded"
LIMIT_EXCEEDED_MESSAGE = "exceeding the maximum number of re-queuing retries"

NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"


def is_ready(wl: Workload) -> bool:
    return wl.condition_is(PODS_READY, "True")


def report(wl: Workload, ready: bool, now: int) -> str:
    """Pods became ready (or not): set PodsReady as upstream's job reconciler does.

    Returns the reason when the workload just became ready (Started or Recovered), "".
    """
    old = wl.conditions.get(PODS_READY)
    if ready:
        was_ready = old is not None and old.status == "True"
        recovering = old is not None and old.reason in (WAIT_FOR_RECOVERY, RECOVERED)
        reason = RECOVERED if recovering else STARTED
        wl.set_condition(PODS_READY, "True", reason, READY_MESSAGE, now)
        return "" if was_ready else reason
    if old is not None and (old.status == "True" or old.reason == WAIT_FOR_RECOVERY):
        wl.set_condition(PODS_READY, "False", WAIT_FOR_RECOVERY, RECOVERY_MESSAGE, now)
    else:
        wl.set_condition(PODS_READY, "False", WAIT_FOR_START, NOT_READY_MESSAGE, now)
    return ""


def on_admitted(wl: Workload, now: int) -> None:
    """Admitted=True: the pods have not started yet (a ready condition is kept)."""
    if not is_ready(wl):
        report(wl, False, now)


def on_unadmitted(wl: Workload, now: int) -> None:
    """Evicted or requeued: whatever the pods were, the next admission starts over."""
    wl.set_condition(PODS_READY, "False", WAIT_FOR_START, NOT_READY_MESSAGE, now)


def deadline(wl: Workload, config: WaitForPodsReady) -> tuple[int, str] | None:
    """When an admitted workload that is not ready times out, and the underlying cause.

    None when nothing runs: not admitted, ready, inactive, or already being evicted.
    """
    if not wl.active or wl.eviction is not None or not wl.is_admitted():
        return None
    ready = wl.conditions.get(PODS_READY)
    if ready is not None and ready.status == "True":
        return None
    if ready is None or ready.reason in (WAIT_FOR_START, PODS_READY):
        admitted = wl.conditions["Admitted"]
        return admitted.last_transition + config.timeout, WAIT_FOR_START
    if ready.reason == WAIT_FOR_RECOVERY and config.recovery_timeout is not None:
        return ready.last_transition + config.recovery_timeout, WAIT_FOR_RECOVERY
    return None


def backoff(config: WaitForPodsReady, count: int) -> int:
    """Microseconds to wait before the ``count``-th requeue (count >= 1)."""
    # Upstream's cap when none is given is the largest duration Go can hold (~292 years).
    cap = config.backoff_max_seconds if config.backoff_max_seconds > 0 else 2**63 // 10**9 // 2
    doublings: int = min(max(0, count - 1), 62)
    seconds: int = min(config.backoff_base_seconds << doublings, cap)
    return seconds * 10**6


def limit_exceeded(wl: Workload, config: WaitForPodsReady) -> bool:
    """One more requeue would pass ``backoffLimitCount``: deactivate instead."""
    limit = config.backoff_limit_count
    return limit is not None and wl.requeue_count + 1 > limit


def timeout_message(wl: Workload) -> str:
    return f"Exceeded the PodsReady timeout {wl.key}"
