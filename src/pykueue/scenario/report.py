"""The result document of a scenario and its comparison with `expect`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pykueue.api import quantity
from pykueue.api.topology import HOSTNAME_LABEL
from pykueue.engine import intake
from pykueue.engine.events import PREEMPTED
from pykueue.engine.state import State
from pykueue.engine.workloads import PodSetAssignment, Workload

# The event types FORMAT.md defines; the engine records more (Evicted, for metrics), which
# the scenario document leaves out so it keeps to the format.
REPORTED_EVENTS = frozenset({"Admitted", "Preempted", "Pending", "Finished"})


def snapshot(state: State, with_events: bool) -> dict[str, Any]:
    """The state as FORMAT.md describes it: every key present, lists sorted."""
    result: dict[str, Any] = {
        "admitted": {
            wl.key: _admitted(wl) for wl in _sorted(state.workloads.values()) if wl.admission is not None
        },
        "preempted": sorted({e.workload for e in state.events if e.type == PREEMPTED}),
        "pending": pending(state),
        "inadmissible": inadmissible(state),
        "finished": sorted(state.finished),
        "conditions": _conditions(state),
        "clusterQueueUsage": _usage(state),
        "admissionChecks": _admission_checks(state),
        "requeueState": _requeue_state(state),
        "deactivated": sorted(wl.key for wl in state.workloads.values() if not wl.active),
    }
    if with_events:
        result["events"] = [
            {"cycle": e.cycle, "workload": e.workload, "type": e.type, "message": e.message}
            for e in state.events
            if e.type in REPORTED_EVENTS
        ]
    return result


def _sorted(workloads: Any) -> list[Workload]:
    return sorted(workloads, key=lambda wl: wl.key)


def _admitted(wl: Workload) -> dict[str, Any]:
    assert wl.admission is not None
    return {
        "clusterQueue": wl.admission.cluster_queue,
        "podSets": {ps.name: _pod_set(ps) for ps in wl.admission.pod_sets},
    }


def _pod_set(ps: PodSetAssignment) -> dict[str, Any]:
    result: dict[str, Any] = {
        "count": ps.count,
        "flavors": dict(sorted(ps.flavors.items())),
        "resourceUsage": {res: quantity.format_milli(v) for res, v in sorted(ps.resource_usage.items())},
    }
    if ps.topology is not None:
        assignment = ps.topology.to_v1beta1()
        # FORMAT.md: the output lists domains sorted by their values (the Workload keeps upstream's order).
        assignment["domains"].sort(key=lambda d: d["values"])
        result["topologyAssignment"] = assignment
    if ps.delayed_topology is not None:
        result["delayedTopologyRequest"] = ps.delayed_topology
    return result


def _conditions(state: State) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for wl in _sorted([*state.workloads.values(), *state.finished.values()]):
        if wl.conditions:
            result[wl.key] = {
                kind: {"status": c.status, "reason": c.reason, "message": c.message}
                for kind, c in sorted(wl.conditions.items())
            }
    return result


def _admission_checks(state: State) -> dict[str, Any]:
    """Each workload's `status.admissionChecks`: check name -> state."""
    return {
        wl.key: {name: check.state for name, check in sorted(wl.checks.items())}
        for wl in _sorted([*state.workloads.values(), *state.finished.values()])
        if wl.checks
    }


def _requeue_state(state: State) -> dict[str, Any]:
    """Each workload's `status.requeueState` (count, and requeueAt while it waits)."""
    result: dict[str, Any] = {}
    for wl in _sorted([*state.workloads.values(), *state.finished.values()]):
        if not wl.requeue_count and wl.requeue_at is None:
            continue
        entry: dict[str, Any] = {"count": wl.requeue_count}
        if wl.requeue_at is not None:
            entry["requeueAt"] = _time(wl.requeue_at)
        result[wl.key] = entry
    return result


def _time(micros: int) -> str:
    return intake.from_micros(micros).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage(state: State) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, cq in sorted(state.cluster_queues.items()):
        usage = state.cq_usage.get(name, {})
        per_flavor: dict[str, dict[str, str]] = {}
        keys = sorted(set(cq.quotas) | set(usage))
        for flavor, resource in keys:
            per_flavor.setdefault(flavor, {})[resource] = quantity.format_milli(
                usage.get((flavor, resource), 0)
            )
        result[name] = per_flavor
    return result


# ------------------------------------------------------------------ compare


def compare(expect: dict[str, Any], actual: dict[str, Any], where: str) -> list[str]:
    """Every difference between an `expect` block and a result, in words."""
    problems: list[str] = []
    if "admitted" in expect:
        _compare_admitted(expect["admitted"] or {}, actual["admitted"], where, problems, exact=True)
    for key in ("preempted", "finished"):
        if key in expect and sorted(expect[key] or []) != actual[key]:
            problems.append(f"{where}.{key}: expected {sorted(expect[key] or [])}, got {actual[key]}")
    for key in ("pending", "inadmissible"):
        if key in expect:
            want = {cq: sorted(v or []) for cq, v in (expect[key] or {}).items() if v}
            if want != actual[key]:
                problems.append(f"{where}.{key}: expected {want}, got {actual[key]}")
    if "conditions" in expect:
        _compare_conditions(expect["conditions"] or {}, actual["conditions"], where, problems)
    if "clusterQueueUsage" in expect:
        _compare_usage(expect["clusterQueueUsage"] or {}, actual["clusterQueueUsage"], where, problems)
    if "contains" in expect:
        _compare_contains(expect["contains"] or {}, actual, where, problems)
    if "deactivated" in expect and sorted(expect["deactivated"] or []) != actual["deactivated"]:
        problems.append(
            f"{where}.deactivated: expected {sorted(expect['deactivated'] or [])}, got {actual['deactivated']}"
        )
    for key, want in (expect.get("admissionChecks") or {}).items():
        got = actual["admissionChecks"].get(key, {})
        if dict(want or {}) != got:
            problems.append(f"{where}.admissionChecks[{key}]: expected {dict(want or {})}, got {got}")
    for key, want in (expect.get("requeueState") or {}).items():
        _compare_requeue_state(key, want, actual["requeueState"].get(key), where, problems)
    return problems


def _compare_requeue_state(key: str, want: Any, got: Any, where: str, problems: list[str]) -> None:
    """``null`` means no requeue state at all; otherwise the given fields are compared
    (``requeueAt: null`` meaning that none is set)."""
    here = f"{where}.requeueState[{key}]"
    if want is None:
        if got is not None:
            problems.append(f"{here}: expected none, got {got}")
        return
    have = got or {}
    if "count" in want and want["count"] != have.get("count", 0):
        problems.append(f"{here}.count: expected {want['count']}, got {have.get('count', 0)}")
    if "requeueAt" in want:
        expected = want["requeueAt"]
        if expected is not None and not isinstance(expected, str):
            expected = _time(intake.micros(expected))
        elif isinstance(expected, str):
            expected = _time(intake.micros(datetime.fromisoformat(expected.replace("Z", "+00:00"))))
        if expected != have.get("requeueAt"):
            problems.append(f"{here}.requeueAt: expected {expected}, got {have.get('requeueAt')}")


def _compare_admitted(
    want: dict[str, Any], got: dict[str, Any], where: str, problems: list[str], exact: bool
) -> None:
    if exact and sorted(want) != sorted(got):
        problems.append(f"{where}.admitted: expected {sorted(want)}, got {sorted(got)}")
    for key, desc in want.items():
        if key not in got:
            if not exact:
                problems.append(f"{where}.admitted: {key} is not admitted")
            continue
        actual = got[key]
        if desc is None:
            continue
        if "clusterQueue" in desc and desc["clusterQueue"] != actual["clusterQueue"]:
            problems.append(
                f"{where}.admitted[{key}].clusterQueue: expected {desc['clusterQueue']}, got {actual['clusterQueue']}"
            )
        for ps_name, ps_want in (desc.get("podSets") or {}).items():
            ps_got = actual["podSets"].get(ps_name)
            if ps_got is None:
                problems.append(f"{where}.admitted[{key}].podSets: no pod set {ps_name}")
                continue
            if "count" in ps_want and ps_want["count"] != ps_got["count"]:
                problems.append(
                    f"{where}.admitted[{key}].podSets.{ps_name}.count: expected {ps_want['count']}, got {ps_got['count']}"
                )
            if "flavors" in ps_want and dict(ps_want["flavors"] or {}) != ps_got["flavors"]:
                problems.append(
                    f"{where}.admitted[{key}].podSets.{ps_name}.flavors: expected {ps_want['flavors']}, got {ps_got['flavors']}"
                )
            if "resourceUsage" in ps_want:
                want_usage = {r: quantity.parse(v) for r, v in (ps_want["resourceUsage"] or {}).items()}
                got_usage = {r: quantity.parse(v) for r, v in ps_got["resourceUsage"].items()}
                if want_usage != got_usage:
                    problems.append(
                        f"{where}.admitted[{key}].podSets.{ps_name}.resourceUsage: expected {ps_want['resourceUsage']}, got {ps_got['resourceUsage']}"
                    )
            if "delayedTopologyRequest" in ps_want and ps_want["delayedTopologyRequest"] != ps_got.get(
                "delayedTopologyRequest"
            ):
                problems.append(
                    f"{where}.admitted[{key}].podSets.{ps_name}.delayedTopologyRequest: expected "
                    f"{ps_want['delayedTopologyRequest']}, got {ps_got.get('delayedTopologyRequest')}"
                )
            if "topologyAssignment" in ps_want:
                _compare_topology(
                    ps_want["topologyAssignment"],
                    ps_got.get("topologyAssignment"),
                    f"{where}.admitted[{key}].podSets.{ps_name}.topologyAssignment",
                    problems,
                )
        if exact and "podSets" in desc and sorted(desc["podSets"] or {}) != sorted(actual["podSets"]):
            problems.append(
                f"{where}.admitted[{key}].podSets: expected {sorted(desc['podSets'])}, got {sorted(actual['podSets'])}"
            )


def _topology_key(
    assignment: Any, hostname_only: bool = False
) -> tuple[list[str], list[tuple[list[str], int]]] | None:
    if assignment is None:
        return None
    levels = [str(level) for level in assignment.get("levels") or []]
    domains = [
        ([str(v) for v in d.get("values") or []], int(d.get("count", 0)))
        for d in assignment.get("domains") or []
    ]
    if hostname_only:
        levels, domains = levels[-1:], [(values[-1:], count) for values, count in domains]
    # Domains compare as a set of (values, count): the order is upstream's (by full path
    # from the top level), which a file may list sorted by the written values instead.
    return levels, sorted(domains)


def _compare_topology(want: Any, got: Any, where: str, problems: list[str]) -> None:
    """Equal assignments; one that ends in hostnames equals its hostname column alone.

    When a topology's lowest level is the hostname, upstream's assignment names only that
    level (a host fixes every level above it), and so does ours; a file may still spell
    out every level, as FORMAT.md's example does. Both describe the same placement.
    """
    hostname_only = all(
        a is not None and (a.get("levels") or [None])[-1] == HOSTNAME_LABEL for a in (want, got)
    )
    if _topology_key(want, hostname_only) != _topology_key(got, hostname_only):
        problems.append(f"{where}: expected {want}, got {got}")


def _compare_conditions(want: dict[str, Any], got: dict[str, Any], where: str, problems: list[str]) -> None:
    for key, conds in want.items():
        have = got.get(key, {})
        for kind, spec in (conds or {}).items():
            cond = have.get(kind)
            expected = spec if isinstance(spec, dict) else {"status": spec}
            for field_name, value in expected.items():
                actual = None if cond is None else cond.get(field_name)
                if str(value) != str(actual):
                    problems.append(
                        f"{where}.conditions[{key}].{kind}.{field_name}: expected {value}, got {actual}"
                    )


def _compare_usage(want: dict[str, Any], got: dict[str, Any], where: str, problems: list[str]) -> None:
    for cq, flavors in want.items():
        have = got.get(cq)
        if have is None:
            problems.append(f"{where}.clusterQueueUsage: no ClusterQueue {cq}")
            continue
        keys = {(f, r) for f, rs in (flavors or {}).items() for r in (rs or {})}
        keys |= {(f, r) for f, rs in have.items() for r in rs}
        for flavor, resource in sorted(keys):
            a = quantity.parse(((flavors or {}).get(flavor) or {}).get(resource, "0"))
            b = quantity.parse(have.get(flavor, {}).get(resource, "0"))
            if a != b:
                problems.append(
                    f"{where}.clusterQueueUsage.{cq}.{flavor}.{resource}: expected {quantity.format_milli(a)}, "
                    f"got {quantity.format_milli(b)}"
                )


def _compare_contains(want: dict[str, Any], actual: dict[str, Any], where: str, problems: list[str]) -> None:
    here = f"{where}.contains"
    if "admitted" in want:
        _compare_admitted(want["admitted"] or {}, actual["admitted"], here, problems, exact=False)
    for key in want.get("notAdmitted") or []:
        if key in actual["admitted"]:
            problems.append(f"{here}.notAdmitted: {key} holds a quota reservation")
    for key in want.get("preempted") or []:
        if key not in actual["preempted"]:
            problems.append(f"{here}.preempted: {key} was not preempted")
    waiting = {k for lists in (actual["pending"], actual["inadmissible"]) for v in lists.values() for k in v}
    for key in want.get("pending") or []:
        if key not in waiting:
            problems.append(f"{here}.pending: {key} is not waiting in any queue")
    for key in want.get("finished") or []:
        if key not in actual["finished"]:
            problems.append(f"{here}.finished: {key} did not finish")


def pending(state: State) -> dict[str, list[str]]:
    """Active-queue workload keys per ClusterQueue (only queues that have some)."""
    return {name: sorted(wl.key for wl in q.active()) for name, q in state.queues.items() if any(q.active())}


def inadmissible(state: State) -> dict[str, list[str]]:
    """Parked workload keys per ClusterQueue (only queues that have some)."""
    return {name: sorted(q.inadmissible) for name, q in state.queues.items() if q.inadmissible}
