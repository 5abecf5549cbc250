"""The admission lifecycle after a reservation: what controllers report, what time does.

The scheduling cycle reserves quota; everything after that is driven from
outside the cycle, and these are the engine's entry points for it:

    report_check(state, key, check, "Ready")     a check's controller wrote a state
    report_pods_ready(state, key, ready)          pods became ready, or lost readiness
    advance(state, now)                           the clock moves: PodsReady timeouts and
                                                  maximum execution times fire in time
                                                  order, backoffs end
    state.complete_eviction(key)                  an evicted workload's job stopped
                                                  (with config.async_evictions)
    next_deadline(state)                          when `advance` has work next

    pending ──cycle──▶ QuotaReserved ──checks Ready──▶ Admitted ──pods ready──▶ PodsReady
       ▲                   │   │                          │ timeout / recovery timeout
       │        check Retry│   │check Rejected            ▼
       └──── backoff ◀─────┘   └──────────▶ deactivated ◀── past backoffLimitCount,
                                                            or past its maximum execution time

Every function is deterministic and reads no clock: the time is ``state.now``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pykueue.engine import admission_checks, aging, evictions, execution_time, pods_ready
from pykueue.engine.events import PODS_READY, Event
from pykueue.engine.state import State
from pykueue.engine.workloads import CHECK_REJECTED, CHECK_RETRY, CHECK_STATES


def report_check(
    state: State,
    key: str,
    check: str,
    value: str,
    message: str | None = None,
    requeue_after_seconds: int | None = None,
    pod_set_updates: tuple[dict[str, object], ...] | None = None,
) -> None:
    """A check's controller reports ``value`` (Pending, Ready, Retry, Rejected) for a
    workload, and the engine reacts as upstream's workload controller does
    (`reconcile_checks`). Raises KeyError for an unknown workload and ValueError
    for an unknown state."""
    if value not in CHECK_STATES:
        raise ValueError(f"admission check state {value!r} is not one of {', '.join(CHECK_STATES)}")
    wl = state.workloads[key]
    if admission_checks.set_state(
        wl, check, value, state.now, message, requeue_after_seconds, pod_set_updates
    ):
        state.touch(key)
    reconcile_checks(state, key)


def report_checks(state: State, key: str, updates: Sequence[tuple[str, str, str | None, int | None]]) -> None:
    """Several check states of one workload written at once, (check, state, message,
    requeueAfterSeconds) each, then one reaction: one status update, as a controller
    (or several writing together) would make it. Upstream reacts to the update as a
    whole, so a `Rejected` written with a `Ready` resets both to Pending on the
    eviction; reacting after each state would leave the `Ready` one standing."""
    for _check, value, _message, _after in updates:
        if value not in CHECK_STATES:
            raise ValueError(f"admission check state {value!r} is not one of {', '.join(CHECK_STATES)}")
    wl = state.workloads[key]
    changed = False
    for check, value, message, after in updates:
        if admission_checks.set_state(wl, check, value, state.now, message, after, None):
            changed = True
    if changed:
        state.touch(key)
    reconcile_checks(state, key)


def reconcile_checks(state: State, key: str) -> None:
    """React to a workload's check states as upstream's workload controller does.

    The list of checks follows the ClusterQueue first (a check that does not apply,
    e.g. one for other flavors while there is no reservation, is dropped). Holding a
    reservation: a Rejected check deactivates the workload, a Retry check evicts it
    (requeued after the checks' ``requeueAfterSeconds``, if any), every check Ready
    admits it. Without a reservation the states are kept: a Ready check
    admits at the next reservation, a Retry or Rejected one keeps the scheduler
    away; every eviction resets them to Pending. A controller that reads check
    states from the store (rather than calling `report_check`) calls this after
    applying the workload.
    """
    wl = state.workloads.get(key)
    if wl is None:
        return
    # The list follows the ClusterQueue first: a state written for a check that does not
    # apply (now) is dropped, as upstream's workload controller does on every update.
    state.sync_checks(wl)
    if wl.admission is None:
        if not admission_checks.has_failed(wl):
            state.unpark(wl)
        return
    if wl.eviction is not None:
        return
    rejected = admission_checks.in_state(wl, CHECK_REJECTED)
    if rejected:
        state.deactivate(key, evictions.ADMISSION_CHECK, admission_checks.summary(rejected, CHECK_REJECTED))
        return
    retry = admission_checks.in_state(wl, CHECK_RETRY)
    if retry:
        until = admission_checks.retry_until(wl)
        if until is not None and until > state.now and (wl.requeue_at is None or wl.requeue_at < until):
            wl.requeue_at = until
        message = f"Evicted due to {admission_checks.summary(retry, CHECK_RETRY)}"
        state.evict(key, evictions.ADMISSION_CHECK, message)
        return
    state.sync_admitted(wl)


def report_pods_ready(state: State, key: str, ready: bool) -> None:
    """The workload's pods are all ready (``ready``), or one of them is not any more.

    Sets PodsReady as upstream's job reconciler does, keeps `State.pods_not_ready`
    (what blockAdmission waits on) and records a PODS_READY event the first time
    the pods are ready after an admission. Raises KeyError for an unknown workload.
    """
    wl = state.workloads[key]
    before = wl.conditions.get(pods_ready.PODS_READY)
    was = None if before is None else (before.status, before.reason, before.message)
    became = pods_ready.report(wl, ready, state.now)
    after = wl.conditions[pods_ready.PODS_READY]
    if was != (after.status, after.reason, after.message):
        state.touch(key)
    state.mark_pods_ready(key, ready)
    if became and wl.admission is not None:
        admitted = wl.conditions.get("Admitted")
        waited = state.now - admitted.last_transition if admitted is not None else None
        state.record(
            Event(
                state.cycle,
                key,
                PODS_READY,
                pods_ready.READY_MESSAGE,
                became,
                wl.admission.cluster_queue,
                waited=waited,
            )
        )


def advance(state: State, now: int) -> None:
    """Move the clock to ``now``; every PodsReady timeout and maximum execution time
    that falls due on the way fires at its own time, in time order (ties by arrival),
    then backoffs that ended put their workloads back in their queues."""
    while True:
        due = _next_timeout(state, now)
        over = _next_exceeded(state, now)
        if over is not None and (due is None or over < due[:2]):
            state.advance_clock(over[0])
            _exceed(state, over[2])
            continue
        if due is None:
            break
        at, _, key, cause = due
        state.advance_clock(at)
        _time_out(state, key, cause)
    state.advance_clock(now)


def _next_exceeded(state: State, until: int) -> tuple[int, int, str] | None:
    """The first admitted workload to run out of its maximum execution time by ``until``."""
    found = [
        (max(at, state.now), seq, key)
        for at, seq, key in execution_time.due(state.workloads, state.time_limited)
        if at <= until
    ]
    return min(found) if found else None


def _exceed(state: State, key: str) -> None:
    """Upstream's reconcileMaxExecutionTime: the accumulated time is cleared, then the
    workload is deactivated (and so evicted), with a Warning event."""
    wl = state.workloads[key]
    assert wl.admission is not None
    state.record(
        Event(
            state.cycle,
            key,
            execution_time.EXCEEDED,
            execution_time.exceeded_message(wl),
            execution_time.EXCEEDED,
            wl.admission.cluster_queue,
        )
    )
    wl.past_execution_seconds = None
    state.deactivate(key, execution_time.EXCEEDED, execution_time.EXCEEDED_MESSAGE)


def _next_timeout(state: State, until: int) -> tuple[int, int, str, str] | None:
    config = state.config.wait_for_pods_ready
    if config is None:
        return None
    best: tuple[int, int, str, str] | None = None
    for admitted in state.admitted.values():
        for wl in admitted.values():
            found = pods_ready.deadline(wl, config)
            if found is None or found[0] > until:
                continue
            candidate = (max(found[0], state.now), wl.seq, wl.key, found[1])
            if best is None or candidate < best:
                best = candidate
    return best


def _time_out(state: State, key: str, cause: str) -> None:
    """Upstream's reconcileNotReadyTimeout: requeue with backoff, or deactivate."""
    config = state.config.wait_for_pods_ready
    wl = state.workloads[key]
    assert config is not None
    if pods_ready.limit_exceeded(wl, config):
        state.deactivate(key, pods_ready.LIMIT_EXCEEDED, pods_ready.LIMIT_EXCEEDED_MESSAGE)
        return
    wl.requeue_count += 1
    until = state.now + pods_ready.backoff(config, wl.requeue_count)
    if wl.requeue_at is None or wl.requeue_at < until:
        wl.requeue_at = until
    state.evict(key, evictions.PODS_READY_TIMEOUT, pods_ready.timeout_message(wl), underlying_cause=cause)


def next_deadline(state: State) -> int | None:
    """The earliest time `advance` (or the next cycle) would change something: a PodsReady
    timeout, a maximum execution time running out, the end of a requeue backoff, the end of
    a preemption contract's protection, a waiting workload's next point of aging. None when
    nothing is waiting on the clock."""
    times: list[int] = []
    config = state.config.wait_for_pods_ready
    if config is not None:
        for admitted in state.admitted.values():
            for wl in admitted.values():
                found = pods_ready.deadline(wl, config)
                if found is not None:
                    times.append(found[0])
    for queue in state.queues.values():
        for wl in queue.held():
            if wl.requeue_at is not None:
                times.append(wl.requeue_at)
    for bucket in state.unrouted.values():
        # Backing off outside any queue (its LocalQueue stopped): Requeued still turns True on time.
        # Only future ones: a past one was ended by the last clock move, or is no backoff.
        times.extend(
            wl.requeue_at for wl in bucket.values() if wl.requeue_at is not None and wl.requeue_at > state.now
        )
    times.extend(state.protection_deadlines())
    # A preemption put off by a preemption-cost policy is tried again when the put-off ends.
    times.extend(state.put_off.deadlines(state.now))
    times.extend(at for at, _, _ in execution_time.due(state.workloads, state.time_limited))
    step = aging.next_step(state)
    if step is not None:
        times.append(step)
    return min(times) if times else None
