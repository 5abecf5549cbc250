"""The API's rules beyond types: upstream's validating webhooks and the CEL rules of its CRDs.

The models already refuse wrong types, unknown fields, values outside an enum, lists
that are too long and malformed names or quantities. What is checked here needs more
than one field at a time: a resource listed in two resource groups, a flavor's quota
lines out of step with ``coveredResources``, a borrowing limit without a cohort, a
preemption policy combination upstream forbids, a reclaimable-pod count larger than
its pod set, and so on. Each rule is upstream's (pkg/webhooks/*.go, and the
``XValidation`` markers in apis/kueue/v1beta2/*_types.go), with upstream's field path.

`validate(obj)` checks one object on its own; `validate_update(old, new)` adds the
rules about change (immutable fields). Both return every problem found, never stop
at the first, so a user fixes a manifest in one pass. Problems carry only the path and
the message; `manifests` adds the file and the object's name.

Rules about several objects at once (a ClusterQueue naming a flavor that does not
exist, a cycle of cohorts) are not API rules upstream either: such objects are
accepted and reported inactive by the controllers, and so they are here.
"""

from __future__ import annotations

from pydantic import BaseModel

from pykueue.api import governance, unsupported
from pykueue.api import jobset as jobset_api
from pykueue.api import validation_workload as wl_rules
from pykueue.api.admission_check import AdmissionCheck
from pykueue.api.batch import Job, JobSpec
from pykueue.api.checks import (
    IMMUTABLE,
    NEGATIVE,
    Problems,
    check_conditions,
    check_fair_sharing,
    check_label_selector,
    check_labels,
    check_metadata,
    check_taints,
    check_tolerations,
    unique_names,
)
from pykueue.api.cluster_queue import (
    MAX_FLAVOR_RESOURCE_COMBINATIONS,
    MAX_TOTAL_COVERED_RESOURCES,
    MAX_TOTAL_FLAVORS,
    ClusterQueue,
    ResourceGroup,
)
from pykueue.api.cohort import Cohort
from pykueue.api.core import Namespace, Node
from pykueue.api.local_queue import LocalQueue
from pykueue.api.meta import Condition, ObjectMeta, milli, shorten
from pykueue.api.multikueue import MultiKueueCluster, MultiKueueConfig
from pykueue.api.resource_flavor import ResourceFlavor
from pykueue.api.topology import HOSTNAME_LABEL, Topology
from pykueue.api.workload import Workload
from pykueue.errors import FieldProblem

# --- quota tables (ClusterQueue and Cohort) ------------------------------------------------


def check_resource_groups(
    groups: list[ResourceGroup], has_parent: bool, is_cohort: bool, path: str, out: Problems
) -> None:
    """The webhook's validateResourceGroups, the CEL size rule and the total limits."""
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    parent = "parent" if is_cohort else "cohort"
    for i, group in enumerate(groups):
        gpath = f"{path}[{i}]"
        for j, resource in enumerate(group.covered_resources):
            if resource in seen_resources:
                out.add(
                    f"{gpath}.coveredResources[{j}]",
                    f"duplicate value {shorten(resource)}: a resource may be covered by only one resource group",
                )
            seen_resources.add(resource)
        for j, flavor in enumerate(group.flavors):
            fpath = f"{gpath}.flavors[{j}]"
            if flavor.name in seen_flavors:
                out.add(f"{fpath}.name", f"duplicate value {shorten(flavor.name)}: flavor listed twice")
            seen_flavors.add(flavor.name)
            if len(flavor.resources) != len(group.covered_resources):
                out.add(fpath, "flavors must have the same number of resources as the coveredResources")
            for k, quota in enumerate(flavor.resources[: len(group.covered_resources)]):
                qpath = f"{fpath}.resources[{k}]"
                if quota.name != group.covered_resources[k]:
                    out.add(
                        f"{qpath}.name",
                        f"invalid value {shorten(quota.name)}: must match the name in coveredResources "
                        f"({shorten(group.covered_resources[k])})",
                    )
                if milli(quota.nominal_quota) < 0:
                    out.add(
                        f"{qpath}.nominalQuota", f"invalid value {shorten(quota.nominal_quota)}: {NEGATIVE}"
                    )
                for field, limit in (
                    ("borrowingLimit", quota.borrowing_limit),
                    ("lendingLimit", quota.lending_limit),
                ):
                    if limit is None:
                        continue
                    if milli(limit) < 0:
                        out.add(f"{qpath}.{field}", f"invalid value {shorten(limit)}: {NEGATIVE}")
                    if not has_parent:
                        out.add(
                            f"{qpath}.{field}",
                            f"invalid value {shorten(limit)}: must be nil when {parent} is empty",
                        )
                # Only a ClusterQueue must lend at most what it owns; a Cohort's lending
                # limit may exceed its own quota because it also lends what it borrowed.
                lend = quota.lending_limit
                if not is_cohort and lend is not None and milli(lend) > milli(quota.nominal_quota):
                    out.add(
                        f"{qpath}.lendingLimit",
                        f"invalid value {shorten(lend)}: must be less than or equal to the nominalQuota",
                    )
    total_flavors = sum(len(g.flavors) for g in groups)
    if total_flavors > MAX_TOTAL_FLAVORS:
        out.add(
            path,
            f"total number of flavors across all resourceGroups must be <= {MAX_TOTAL_FLAVORS}, "
            f"got {total_flavors}",
        )
    total_covered = sum(len(g.covered_resources) for g in groups)
    if total_covered > MAX_TOTAL_COVERED_RESOURCES:
        out.add(
            path,
            "total number of covered resources across all resourceGroups must be <= "
            f"{MAX_TOTAL_COVERED_RESOURCES}, got {total_covered}",
        )
    for i, group in enumerate(groups):
        combos = sum(len(f.resources) for f in group.flavors)
        if combos > MAX_FLAVOR_RESOURCE_COMBINATIONS:
            out.add(
                f"{path}[{i}]",
                "number of flavor-resource combinations in a resourceGroup must be <= "
                f"{MAX_FLAVOR_RESOURCE_COMBINATIONS}, got {combos}",
            )


# --- one function per kind -----------------------------------------------------------------


def _cluster_queue(cq: ClusterQueue, out: Problems) -> None:
    spec = cq.spec
    check_resource_groups(spec.resource_groups, spec.cohort_name != "", False, "spec.resourceGroups", out)
    check_label_selector(spec.namespace_selector, "spec.namespaceSelector", out)
    preemption = spec.preemption
    if preemption.reclaim_within_cohort == "Never" and preemption.borrow_within_cohort.policy != "Never":
        out.add(
            "spec.preemption",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: borrowing within the cohort "
            "by preemption needs reclaimWithinCohort to allow preemption",
        )
    fungibility = spec.flavor_fungibility
    if fungibility.preference is not None and not (
        fungibility.when_can_borrow == "TryNextFlavor" and fungibility.when_can_preempt == "TryNextFlavor"
    ):
        out.add(
            "spec.flavorFungibility.preference",
            f"preference {shorten(fungibility.preference)} requires both whenCanBorrow and whenCanPreempt "
            "to be TryNextFlavor",
        )
    check_fair_sharing(spec.fair_sharing, "spec.fairSharing", out)
    strategy = spec.admission_checks_strategy
    if strategy is not None:
        base = "spec.admissionChecksStrategy.admissionChecks"
        unique_names(strategy.admission_checks, base, out)
        flavors = set(cq.flavor_names())
        for i, rule in enumerate(strategy.admission_checks):
            for j, flavor in enumerate(rule.on_flavors):
                if flavor not in flavors:
                    out.add(
                        f"{base}[{i}].onFlavors[{j}]",
                        f"unsupported value {shorten(flavor)}: not a flavor of this ClusterQueue's resourceGroups "
                        f"(supported: {', '.join(sorted(flavors)) or 'none'})",
                    )
            if len(set(rule.on_flavors)) != len(rule.on_flavors):
                out.add(f"{base}[{i}].onFlavors", "must not contain duplicates")


def _cohort(cohort: Cohort, out: Problems) -> None:
    check_fair_sharing(cohort.spec.fair_sharing, "spec.fairSharing", out)
    check_resource_groups(
        cohort.spec.resource_groups, cohort.spec.parent_name != "", True, "spec.resourceGroups", out
    )


def _resource_flavor(rf: ResourceFlavor, out: Problems) -> None:
    check_labels(rf.spec.node_labels, "spec.nodeLabels", out)
    check_taints(rf.spec.node_taints, "spec.nodeTaints", out)
    check_tolerations(rf.spec.tolerations, "spec.tolerations", out)
    if rf.spec.topology_name is not None and not rf.spec.node_labels:
        out.add("spec", "at least one nodeLabel is required when topology is set")


def _topology(topology: Topology, out: Problems) -> None:
    labels = topology.level_labels()
    if len(set(labels)) != len(labels):
        out.add("spec.levels", "must be unique")
    if HOSTNAME_LABEL in labels and labels[-1] != HOSTNAME_LABEL:
        out.add("spec.levels", f"the {HOSTNAME_LABEL} label can only be used at the lowest level of topology")


def _multikueue_cluster(cluster: MultiKueueCluster, out: Problems) -> None:
    source = cluster.spec.cluster_source
    if (source.kube_config is None) == (source.cluster_profile_ref is None):
        out.add(
            "spec.clusterSource", "exactly one of the fields in [kubeConfig clusterProfileRef] must be set"
        )


def _multikueue_config(config: MultiKueueConfig, out: Problems) -> None:
    if len(set(config.spec.clusters)) != len(config.spec.clusters):
        out.add("spec.clusters", "must be unique")
    for i, name in enumerate(config.spec.clusters):
        if len(name) > 256:
            out.add(f"spec.clusters[{i}]", "may not be longer than 256 characters")


def _node(node: Node, out: Problems) -> None:
    check_taints(node.spec.taints, "spec.taints", out)


def _job(job: Job, out: Problems) -> None:
    """What the API server refuses in any Job (counts and quantities may not be negative)."""
    _job_spec(job.spec, "spec", out)


def _job_spec(spec: JobSpec, path: str, out: Problems) -> None:
    counts = {
        "parallelism": spec.parallelism,
        "completions": spec.completions,
        "backoffLimit": spec.backoff_limit,
        "activeDeadlineSeconds": spec.active_deadline_seconds,
        "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
    }
    for name, value in counts.items():
        if value is not None and value < 0:
            out.add(f"{path}.{name}", f"invalid value {value}: must be greater than or equal to 0")
    wl_rules.check_pod_spec(spec.template.spec, f"{path}.template.spec", out)


def validate(
    obj: BaseModel, *, check_names: bool = True, single_variable_pod_set: bool = True
) -> list[FieldProblem]:
    """Every rule broken by one object on its own (its path and message; no source/name).

    The keywords relax two API-server-only rules (see `manifests.LoadOptions`).
    """
    from pykueue.api.defaults import is_namespaced

    out = Problems()
    kind = str(getattr(obj, "kind", ""))
    meta = getattr(obj, "metadata", None)
    if isinstance(meta, ObjectMeta):
        check_metadata(meta, kind, is_namespaced(kind), out, check_names)
        if kind in governance.KEYS_BY_KIND:
            out.items.extend(governance.problems(kind, meta.annotations))
    # Fields of upstream features pykueue does not implement: refused, never silently kept.
    out.items.extend(unsupported.problems(obj, meta.annotations if isinstance(meta, ObjectMeta) else None))
    status = getattr(obj, "status", None)
    if isinstance(status, BaseModel) and isinstance(getattr(status, "conditions", None), list):
        conditions = status.conditions  # type: ignore[attr-defined]
        if all(isinstance(c, Condition) for c in conditions):
            check_conditions(conditions, "status.conditions", out)
    if isinstance(obj, ClusterQueue):
        _cluster_queue(obj, out)
    elif isinstance(obj, Cohort):
        _cohort(obj, out)
    elif isinstance(obj, ResourceFlavor):
        _resource_flavor(obj, out)
    elif isinstance(obj, Topology):
        _topology(obj, out)
    elif isinstance(obj, MultiKueueCluster):
        _multikueue_cluster(obj, out)
    elif isinstance(obj, MultiKueueConfig):
        _multikueue_config(obj, out)
    elif isinstance(obj, Node):
        _node(obj, out)
    elif isinstance(obj, Workload):
        out.items.extend(wl_rules.validate_workload(obj, single_variable_pod_set))
    elif isinstance(obj, Job):
        _job(obj, out)
    elif isinstance(obj, jobset_api.JobSet):
        jobset_api.problems(obj, _job_spec, out)
    elif isinstance(obj, Namespace | LocalQueue | AdmissionCheck):
        pass  # their rules are all structural, checked by the model
    return out.items


def validate_update(old: BaseModel, new: BaseModel) -> list[FieldProblem]:
    """The rules of `validate` on `new`, plus what may not change from `old` to `new`."""
    out = Problems()
    out.items.extend(validate(new))
    old_kind, new_kind = getattr(old, "kind", ""), getattr(new, "kind", "")
    if old_kind != new_kind:
        out.add("kind", f"{IMMUTABLE} ({old_kind} -> {new_kind})")
        return out.items
    old_meta, new_meta = getattr(old, "metadata", None), getattr(new, "metadata", None)
    if isinstance(old_meta, ObjectMeta) and isinstance(new_meta, ObjectMeta):
        if old_meta.name != new_meta.name:
            out.add("metadata.name", IMMUTABLE)
        if old_meta.namespace != new_meta.namespace:
            out.add("metadata.namespace", IMMUTABLE)
    if isinstance(old, ClusterQueue) and isinstance(new, ClusterQueue):
        if old.spec.concurrent_admission_policy != new.spec.concurrent_admission_policy:
            out.add("spec.concurrentAdmissionPolicy", IMMUTABLE)
    elif isinstance(old, LocalQueue) and isinstance(new, LocalQueue):
        if old.spec.cluster_queue != new.spec.cluster_queue:
            out.add("spec.clusterQueue", IMMUTABLE)
    elif isinstance(old, AdmissionCheck) and isinstance(new, AdmissionCheck):
        if old.spec.controller_name != new.spec.controller_name:
            out.add("spec.controllerName", IMMUTABLE)
    elif isinstance(old, ResourceFlavor) and isinstance(new, ResourceFlavor):
        if old.spec.topology_name is not None and old.spec.topology_name != new.spec.topology_name:
            out.add("spec", "topologyName is immutable when topologyName is set")
    elif isinstance(old, Topology) and isinstance(new, Topology):
        before, after = old.level_labels(), new.level_labels()
        if before != after and not (before[-1] == HOSTNAME_LABEL and after[-1] == HOSTNAME_LABEL):
            out.add(
                "spec.levels",
                "levels are mutable only when kubernetes.io/hostname is the lowest level both before and "
                "after the change",
            )
    elif isinstance(old, Workload) and isinstance(new, Workload):
        out.items.extend(wl_rules.validate_workload_update(old, new))
    return out.items
