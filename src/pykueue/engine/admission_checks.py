"""Admission checks: which apply to a workload, and what their states mean.

A ClusterQueue names checks in ``admissionChecksStrategy`` (the older
``admissionChecks`` list is converted into rules that apply to every flavor). A
rule with ``onFlavors`` applies only to workloads assigned one of those flavors.
The workload's ``status.admissionChecks`` list follows the ClusterQueue, as
upstream's workload controller keeps it:

    no reservation   the checks that apply to every flavor of the ClusterQueue
    reservation      the checks that apply to a flavor of the admission

Checks missing from the list are added ``Pending``; checks no longer required
are dropped; the list is sorted by name. The states themselves are written by
each check's controller (the ``checks`` step of a scenario); this module only
reads them:

    every check Ready      a workload holding a reservation is Admitted
    any check Retry        the reservation is released, the workload requeued
    any check Rejected     the workload is deactivated

The messages are upstream's, word for word, so explanations and scenario
expectations read the same as in a Kueue cluster.
"""

from __future__ import annotations

from collections.abc import Iterable

from pykueue.engine import specs
from pykueue.engine.workloads import (
    CHECK_PENDING,
    CHECK_READY,
    CHECK_REJECTED,
    CHECK_RETRY,
    Admission,
    CheckState,
    Workload,
)

# Upstream's words on the Admitted condition.
NOT_READY_MESSAGE = "The workload has not all checks ready"
ADMITTED_MESSAGE = "The workload is admitted"


def applicable(cq: specs.ClusterQueue, admission: Admission | None) -> list[str]:
    """The checks a workload of ``cq`` must pass, sorted by name."""
    if not cq.admission_checks:
        return []
    all_flavors = set(cq.flavors())
    if admission is None:
        # Only the checks that apply whatever flavor the workload gets.
        wanted = {
            name
            for name, flavors in cq.check_flavors().items()
            if flavors is None or all_flavors <= set(flavors)
        }
    else:
        assigned = {flavor for ps in admission.pod_sets for flavor in ps.flavors.values()}
        wanted = {
            name
            for name, flavors in cq.check_flavors().items()
            if flavors is None or not assigned.isdisjoint(flavors)
        }
    return sorted(wanted)


def sync(wl: Workload, required: Iterable[str], now: int) -> bool:
    """Make ``wl.checks`` list exactly ``required``: add missing as Pending, drop others.

    States already reached are kept (a check Ready before the reservation stays
    Ready). Returns whether the list changed.
    """
    wanted = sorted(set(required))
    changed = False
    checks: dict[str, CheckState] = {}
    for name in wanted:
        current = wl.checks.get(name)
        if current is None:
            current = CheckState(name, CHECK_PENDING, "", now)
            changed = True
        checks[name] = current
    if len(checks) != len(wl.checks):
        changed = True
    if changed or list(wl.checks) != wanted:
        wl.checks = checks
    return changed


def all_ready(wl: Workload) -> bool:
    return all(check.state == CHECK_READY for check in wl.checks.values())


def in_state(wl: Workload, state: str) -> list[CheckState]:
    return [check for check in sorted(wl.checks.values(), key=lambda c: c.name) if check.state == state]


def has_failed(wl: Workload) -> bool:
    """A check is Retry or Rejected: upstream's scheduler does not consider such a workload."""
    return any(check.state in (CHECK_RETRY, CHECK_REJECTED) for check in wl.checks.values())


def summary(checks: list[CheckState], state: str) -> str:
    """Upstream's words for checks in one state: ``AdmissionCheck in Retry state: "a" (why)``."""
    parts = [f'"{c.name}" ({c.message})' if c.message else f'"{c.name}"' for c in checks]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def set_state(
    wl: Workload,
    name: str,
    state: str,
    now: int,
    message: str | None = None,
    requeue_after_seconds: int | None = None,
    pod_set_updates: tuple[dict[str, object], ...] | None = None,
) -> bool:
    """A check's controller reports a state (upstream's SetAdmissionCheckState).

    The transition time moves only when the state changes. A check that is not
    in the list is added, as a controller's status write would add it.
    """
    current = wl.checks.get(name)
    if current is None:
        current = CheckState(name, state, "", now)
        wl.checks = dict(sorted({**wl.checks, name: current}.items()))
        changed = True
    else:
        changed = current.state != state
        if changed:
            current.state = state
            current.last_transition = now
    if message is not None and message != current.message:
        current.message = message
        changed = True
    if requeue_after_seconds is not None and requeue_after_seconds != current.requeue_after_seconds:
        current.requeue_after_seconds = requeue_after_seconds
        changed = True
    if pod_set_updates is not None and pod_set_updates != current.pod_set_updates:
        current.pod_set_updates = pod_set_updates
        changed = True
    return changed


def reset_on_eviction(wl: Workload, now: int) -> None:
    """Every check not Pending goes back to Pending, as upstream's eviction does.

    A Retry check counts one more retry; its ``requeueAfterSeconds`` is kept.
    """
    for name, check in wl.checks.items():
        if check.state == CHECK_PENDING:
            continue
        retries = (check.retry_count or 0) + 1 if check.state == CHECK_RETRY else None
        wl.checks[name] = CheckState(
            name,
            CHECK_PENDING,
            f"Reset to Pending after eviction. Previously: {check.state}",
            now,
            requeue_after_seconds=check.requeue_after_seconds,
            retry_count=retries,
        )


def retry_until(wl: Workload) -> int | None:
    """The latest ``lastTransitionTime + requeueAfterSeconds`` of the Retry checks, or None."""
    latest: int | None = None
    for check in wl.checks.values():
        if check.state != CHECK_RETRY or check.requeue_after_seconds is None or not check.last_transition:
            continue
        until = check.last_transition + check.requeue_after_seconds * 10**6
        latest = until if latest is None else max(latest, until)
    return latest


def sync_admitted(wl: Workload, now: int) -> bool | None:
    """Admitted follows the reservation and the checks (upstream's SyncAdmittedCondition).

    True: it became Admitted; False: it waits for its checks (Admitted=False); None: nothing
    to do, with no reservation, while being evicted, or when already Admitted (a check
    added later does not take that back, as upstream).
    """
    if wl.admission is None or wl.eviction is not None or wl.is_admitted():
        return None
    if all_ready(wl) and any(ps.topology_pending for ps in wl.admission.pod_sets):
        # Every check is Ready but a topology still waits for its second pass: Admitted stays
        # False until the scheduler places it (upstream's SyncAdmittedCondition).
        changed = wl.set_condition(
            "Admitted",
            "False",
            "PendingDelayedTopologyRequests",
            "There are pending delayed topology requests",
            now,
        )
        return False if changed else None
    if not all_ready(wl):
        wl.set_condition("Admitted", "False", "UnsatisfiedAdmissionChecks", NOT_READY_MESSAGE, now)
        return False
    wl.set_condition("Admitted", "True", "Admitted", ADMITTED_MESSAGE, now)
    return True
