"""ClusterQueue and Cohort rules: upstream's clusterqueue/cohort webhooks and CEL rules."""

from __future__ import annotations

from typing import Any

import pytest

from . import samples
from .checking import accepted, problems, refused
from .samples import DELETE, with_

RG0 = "spec.resourceGroups[0]"
F0R0 = f"{RG0}.flavors[0].resources[0]"


def cq(**spec: Any) -> dict[str, Any]:
    doc = samples.cluster_queue()
    if "resourceGroups" in spec:
        del doc["spec"]["admissionChecksStrategy"]  # it names a flavor of the sample's groups
    doc["spec"].update(spec)
    return doc


def group(resources: list[str], *flavors: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "coveredResources": resources,
        "flavors": [
            {"name": name, "resources": [{"name": r, "nominalQuota": "1"} for r in names]}
            for name, names in flavors
        ],
    }


def test_sample_is_valid() -> None:
    accepted(samples.cluster_queue())


def test_at_most_16_resource_groups() -> None:
    groups = [group([f"example.com/r{i}"], (f"f{i}", [f"example.com/r{i}"])) for i in range(17)]
    refused(cq(resourceGroups=groups), "spec.resourceGroups", "at most 16 items")
    accepted(cq(resourceGroups=groups[:16]))


def test_at_most_64_flavors_per_group_and_64_resources_per_flavor() -> None:
    flavors = [(f"f{i}", ["cpu"]) for i in range(65)]
    refused(cq(resourceGroups=[group(["cpu"], *flavors)]), f"{RG0}.flavors", "at most 64 items")
    accepted(cq(resourceGroups=[group(["cpu"], *flavors[:64])]))
    names = [f"example.com/r{i}" for i in range(65)]
    refused(cq(resourceGroups=[group(names, ("f", names))]), f"{RG0}.coveredResources", "at most 64 items")


def test_total_flavors_across_groups_at_most_256() -> None:
    groups = [
        group([f"example.com/r{g}"], *[(f"f{g}-{i}", [f"example.com/r{g}"]) for i in range(33)])
        for g in range(8)
    ]
    refused(cq(resourceGroups=groups), "spec.resourceGroups", "must be <= 256, got 264")
    accepted(cq(resourceGroups=groups[:7]))


def test_group_needs_a_covered_resource_and_a_flavor() -> None:
    refused(
        cq(resourceGroups=[{"coveredResources": [], "flavors": []}]), f"{RG0}.coveredResources", "at least 1"
    )
    refused(cq(resourceGroups=[{"coveredResources": ["cpu"], "flavors": []}]), f"{RG0}.flavors", "at least 1")


def test_resource_in_only_one_group() -> None:
    doc = cq(resourceGroups=[group(["cpu"], ("a", ["cpu"])), group(["cpu"], ("b", ["cpu"]))])
    refused(doc, "spec.resourceGroups[1].coveredResources[0]", "only one resource group")
    accepted(cq(resourceGroups=[group(["cpu"], ("a", ["cpu"])), group(["memory"], ("b", ["memory"]))]))


def test_flavor_listed_twice() -> None:
    doc = cq(resourceGroups=[group(["cpu"], ("a", ["cpu"]), ("a", ["cpu"]))])
    refused(doc, f"{RG0}.flavors[1].name", "flavor listed twice")
    doc = cq(resourceGroups=[group(["cpu"], ("a", ["cpu"])), group(["memory"], ("a", ["memory"]))])
    refused(doc, "spec.resourceGroups[1].flavors[0].name", "flavor listed twice")


def test_flavor_resources_match_covered_resources_in_number_and_order() -> None:
    refused(
        cq(resourceGroups=[group(["cpu", "memory"], ("a", ["cpu"]))]),
        f"{RG0}.flavors[0]",
        "same number of resources as the coveredResources",
    )
    refused(
        cq(resourceGroups=[group(["cpu", "memory"], ("a", ["memory", "cpu"]))]),
        f"{F0R0}.name",
        "must match the name in coveredResources",
    )
    accepted(cq(resourceGroups=[group(["cpu", "memory"], ("a", ["cpu", "memory"]))]))


@pytest.mark.parametrize("field", ["borrowingLimit", "lendingLimit"])
def test_limits_need_a_cohort(field: str) -> None:
    doc = with_(samples.cluster_queue(), "spec.cohortName", DELETE)
    doc = with_(doc, f"{F0R0}.{'lendingLimit' if field == 'borrowingLimit' else 'borrowingLimit'}", DELETE)
    refused(doc, f"{F0R0}.{field}", "must be nil when cohort is empty")
    accepted(with_(doc, f"{F0R0}.{field}", DELETE))


def test_lending_limit_at_most_nominal_quota() -> None:
    refused(
        with_(samples.cluster_queue(), f"{F0R0}.lendingLimit", "41"), f"{F0R0}.lendingLimit", "nominalQuota"
    )
    accepted(with_(samples.cluster_queue(), f"{F0R0}.lendingLimit", "40000m"))


@pytest.mark.parametrize("field", ["nominalQuota", "borrowingLimit", "lendingLimit"])
def test_quantities_are_not_negative(field: str) -> None:
    refused(
        with_(samples.cluster_queue(), f"{F0R0}.{field}", "-1"),
        f"{F0R0}.{field}",
        "greater than or equal to 0",
    )


def test_invalid_quantity_is_refused_at_its_path() -> None:
    refused(
        with_(samples.cluster_queue(), f"{F0R0}.nominalQuota", "lots"),
        f"{F0R0}.nominalQuota",
        "not a quantity",
    )


def test_resource_names_are_qualified_names() -> None:
    refused(
        cq(resourceGroups=[group(["bad name"], ("a", ["bad name"]))]),
        f"{RG0}.coveredResources[0]",
        "name part",
    )


def test_names_are_dns_subdomains() -> None:
    refused(cq(cohortName="Research"), "spec.cohortName", "RFC 1123 subdomain")
    refused(
        with_(samples.cluster_queue(), "metadata.name", "Bad_Name"), "metadata.name", "RFC 1123 subdomain"
    )
    refused(
        with_(samples.cluster_queue(), f"{RG0}.flavors[0].name", "On-Demand"),
        f"{RG0}.flavors[0].name",
        "RFC 1123",
    )


def test_borrow_within_cohort_needs_reclaim_within_cohort() -> None:
    preemption = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    refused(cq(preemption=preemption), "spec.preemption", "reclaimWithinCohort=Never")
    accepted(cq(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"}}))


def test_preemption_policies_are_enums() -> None:
    refused(
        cq(preemption={"withinClusterQueue": "Any"}),
        "spec.preemption.withinClusterQueue",
        "unsupported value",
    )
    refused(
        cq(preemption={"reclaimWithinCohort": "LowerOrNewerEqualPriority"}),
        "spec.preemption.reclaimWithinCohort",
        "",
    )


def test_fungibility_preference_needs_try_next_flavor_twice() -> None:
    fungibility = {"whenCanBorrow": "MayStopSearch", "preference": "BorrowingOverPreemption"}
    refused(cq(flavorFungibility=fungibility), "spec.flavorFungibility.preference", "TryNextFlavor")
    fungibility["whenCanBorrow"] = "TryNextFlavor"
    accepted(cq(flavorFungibility=fungibility))


def test_queueing_strategy_and_stop_policy_are_enums() -> None:
    refused(cq(queueingStrategy="FIFO"), "spec.queueingStrategy", "'StrictFIFO' or 'BestEffortFIFO'")
    refused(cq(stopPolicy="Pause"), "spec.stopPolicy", "unsupported value 'Pause'")
    accepted(cq(queueingStrategy="StrictFIFO", stopPolicy="HoldAndDrain"))


def test_namespace_selector_rules() -> None:
    selector = {"matchExpressions": [{"key": "team", "operator": "In", "values": []}]}
    refused(
        cq(namespaceSelector=selector),
        "spec.namespaceSelector.matchExpressions[0].values",
        "must be specified",
    )
    selector = {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]}
    refused(cq(namespaceSelector=selector), "spec.namespaceSelector.matchExpressions[0].values", "may not be")
    refused(
        cq(namespaceSelector={"matchLabels": {"team": "a b"}}), "spec.namespaceSelector.matchLabels[team]", ""
    )
    accepted(cq(namespaceSelector={"matchLabels": {"team": "a"}}))


def test_admission_check_on_flavors_must_be_flavors_of_the_queue() -> None:
    strategy = {"admissionChecks": [{"name": "prov", "onFlavors": ["gold"]}]}
    refused(
        cq(admissionChecksStrategy=strategy),
        "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
        "gold",
    )


def test_admission_check_names_unique() -> None:
    strategy = {"admissionChecks": [{"name": "prov"}, {"name": "prov"}]}
    refused(
        cq(admissionChecksStrategy=strategy),
        "spec.admissionChecksStrategy.admissionChecks[1].name",
        "duplicate",
    )


@pytest.mark.parametrize(
    ("weight", "ok"), [("0", True), ("1", True), ("2n", True), ("1n", False), ("-1", False)]
)
def test_fair_sharing_weight(weight: str, ok: bool) -> None:
    doc = cq(fairSharing={"weight": weight})
    if ok:
        accepted(doc)
    else:
        assert [p.path for p in problems(doc)] == ["spec.fairSharing"]


# --- Cohort -----------------------------------------------------------------------------------


def test_cohort_sample_is_valid_and_may_lend_more_than_it_owns() -> None:
    accepted(samples.cohort())


def test_cohort_limits_need_a_parent() -> None:
    doc = with_(samples.cohort(), "spec.parentName", DELETE)
    refused(
        doc, "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "must be nil when parent is empty"
    )


def test_cohort_resource_group_rules_are_shared() -> None:
    doc = samples.cohort()
    doc["spec"]["resourceGroups"].append(group(["cpu"], ("other", ["cpu"])))
    refused(doc, "spec.resourceGroups[1].coveredResources[0]", "only one resource group")


def test_cohort_weight_is_checked() -> None:
    refused(
        with_(samples.cohort(), "spec.fairSharing.weight", "-1"), "spec.fairSharing", "greater than or equal"
    )


def test_cohort_may_name_itself_as_parent_as_upstream_allows() -> None:
    # Upstream deactivates a cycle instead of refusing it; the engine sees it.
    accepted(with_(samples.cohort(), "spec.parentName", "research"))
