"""The governance policies a simulated design runs under (docs/governance.md), for its summary.

A ClusterQueue's ``pykueue.io/aging``, ``pykueue.io/preemption-contract``,
``pykueue.io/preemption-cost`` and ``pykueue.io/reservation`` annotations (the last also from
its cohorts), and the site defaults of the design's Configuration (``pykueue.preemptionContract``,
``pykueue.preemptionCost``, ``pykueue.reservation``) for every ClusterQueue without one of its own. The summary names each so that a
figure can be read with the rules that produced it: without this, a run with aging and one
without look alike in the report.
"""

from __future__ import annotations

from typing import Any

from pykueue.api import governance
from pykueue.api.governance import Aging, PreemptionContract, PreemptionCost, Reservation, duration_text
from pykueue.sim.design import Design


def aging_text(policy: Aging) -> str:
    text = f"{policy.points} point(s) per {duration_text(policy.per)} of wait, at most {policy.cap}"
    if policy.priority_classes is not None:
        text += f"; priority classes {', '.join(policy.priority_classes) or '(none)'}"
    if policy.max_priority is not None:
        text += f"; workloads of priority up to {policy.max_priority}"
    return text


def contract_text(contract: PreemptionContract) -> str:
    parts = []
    if contract.min_run_time is not None:
        parts.append(f"minRunTime {duration_text(contract.min_run_time)}")
    if contract.max_preemptions is not None:
        within = f" per {duration_text(contract.window)}" if contract.window is not None else ""
        parts.append(f"at most {contract.max_preemptions} preemption(s){within}")
    return ", ".join(parts) or "no promise"


def cost_text(policy: PreemptionCost) -> str:
    parts = []
    if policy.least_lost:
        parts.append("least lost work first")
    if policy.wait_for_end is not None:
        parts.append(f"waits up to {duration_text(policy.wait_for_end)} for a declared end")
    if policy.max_lost is not None and policy.put_off_for is not None:
        parts.append(
            f"puts off a preemption losing over {duration_text(policy.max_lost)} of its size "
            f"for up to {duration_text(policy.put_off_for)}"
        )
    return ", ".join(parts) or "upstream's order"


def reservation_text(policy: Reservation) -> str:
    return f"after {duration_text(policy.after)} of wait, backfill by declared limit"


def _reservations(design: Design) -> dict[str, str]:
    """ClusterQueue -> its reservation policy in words: its own, its nearest cohort's, the site's."""
    cohorts: dict[str, tuple[str, Reservation | None]] = {}
    for obj in design.objects:
        if obj.kind == "Cohort":
            parent = getattr(obj.spec, "parent_name", "") or ""
            cohorts[obj.metadata.name] = (parent, governance.reservation(obj.metadata.annotations or {}))
    default = design.config.default_reservation
    out: dict[str, str] = {}
    for obj in design.objects:
        if obj.kind != "ClusterQueue":
            continue
        own = governance.reservation(obj.metadata.annotations or {})
        if own is not None:
            out[obj.metadata.name] = reservation_text(own)
            continue
        name, seen = getattr(obj.spec, "cohort_name", "") or "", set()
        while name in cohorts and name not in seen:
            seen.add(name)
            parent, policy = cohorts[name]
            if policy is not None:
                out[obj.metadata.name] = f"{reservation_text(policy)} (Cohort {name})"
                break
            name = parent
        else:
            if default is not None:
                out[obj.metadata.name] = f"{reservation_text(default)} (site default)"
    return dict(sorted(out.items()))


def in_force(design: Design) -> dict[str, Any]:
    """{"aging": {ClusterQueue: text}, "preemptionContract": {ClusterQueue: text},
    "preemptionCost": {ClusterQueue: text}, "reservation": {ClusterQueue: text},
    "siteDefaultContract": text}.

    A contract that comes from the site default says so ("... (site default)"); a queue
    with neither is absent from the maps, and "siteDefaultContract" is "none" without one.
    """
    default = design.config.default_contract
    default_cost = design.config.default_preemption_cost
    aging: dict[str, str] = {}
    contracts: dict[str, str] = {}
    costs: dict[str, str] = {}
    cohort_costs, parents = _cohort_costs(design)
    for obj in design.objects:
        if obj.kind != "ClusterQueue":
            continue
        annotations = obj.metadata.annotations or {}
        name = obj.metadata.name
        policy = governance.aging(annotations)
        if policy is not None:
            aging[name] = aging_text(policy)
        own = governance.contract(annotations)
        if own is not None:
            contracts[name] = contract_text(own)
        elif default is not None:
            contracts[name] = f"{contract_text(default)} (site default)"
        cost = governance.preemption_cost(annotations)
        inherited = _inherited(getattr(obj.spec, "cohort_name", ""), cohort_costs, parents)
        if cost is not None:
            costs[name] = cost_text(cost)
        elif inherited is not None:
            costs[name] = f"{cost_text(inherited[1])} (Cohort {inherited[0]})"
        elif default_cost is not None:
            costs[name] = f"{cost_text(default_cost)} (site default)"
    return {
        "aging": dict(sorted(aging.items())),
        "preemptionContract": dict(sorted(contracts.items())),
        "preemptionCost": dict(sorted(costs.items())),
        "reservation": _reservations(design),
        "siteDefaultContract": contract_text(default) if default is not None else "none",
    }


def lines(policies: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(ClusterQueue, policy, what it says) rows; one "-" row per kind that no queue has."""
    rows: list[tuple[str, str, str]] = []
    for key, label in (
        ("aging", "aging"),
        ("preemptionContract", "preemption contract"),
        ("preemptionCost", "preemption cost"),
        ("reservation", "reservation"),
    ):
        entries = policies.get(key, {})
        if not entries:
            rows.append(("-", label, "none (upstream behaviour)"))
        rows.extend((name, label, text) for name, text in entries.items())
    return rows


def _cohort_costs(design: Design) -> tuple[dict[str, PreemptionCost], dict[str, str]]:
    """The preemption-cost policies of the design's Cohorts, and each Cohort's parent."""
    costs: dict[str, PreemptionCost] = {}
    parents: dict[str, str] = {}
    for obj in design.objects:
        if obj.kind != "Cohort":
            continue
        parents[obj.metadata.name] = getattr(obj.spec, "parent_name", "")
        cost = governance.preemption_cost(obj.metadata.annotations or {})
        if cost is not None:
            costs[obj.metadata.name] = cost
    return costs, parents


def _inherited(
    cohort: str, costs: dict[str, PreemptionCost], parents: dict[str, str]
) -> tuple[str, PreemptionCost] | None:
    """The nearest Cohort up from ``cohort`` with a policy, as the engine takes it."""
    seen: set[str] = set()
    while cohort and cohort not in seen:
        seen.add(cohort)
        if cohort in costs:
            return cohort, costs[cohort]
        cohort = parents.get(cohort, "")
    return None
