"""Rules of the other kinds: flavors, topologies, MultiKueue, admission checks, metadata."""

from __future__ import annotations

from . import samples
from .checking import accepted, refused
from .samples import DELETE, with_


def test_flavor_sample_is_valid() -> None:
    accepted(samples.resource_flavor())


def test_flavor_topology_needs_a_node_label() -> None:
    refused(
        with_(samples.resource_flavor(), "spec.nodeLabels", {}), "spec", "at least one nodeLabel is required"
    )


def test_flavor_node_labels_at_most_8_and_valid() -> None:
    labels = {f"l{i}": "v" for i in range(9)}
    refused(with_(samples.resource_flavor(), "spec.nodeLabels", labels), "spec.nodeLabels", "at most 8")
    refused(
        with_(samples.resource_flavor(), "spec.nodeLabels", {"a": "b c"}), "spec.nodeLabels[a]", "valid label"
    )
    refused(with_(samples.resource_flavor(), "spec.nodeLabels", {"a b": "c"}), "spec.nodeLabels", "key 'a b'")


def test_flavor_taints_unique_by_key_and_effect() -> None:
    taint = {"key": "spot", "value": "true", "effect": "NoSchedule"}
    refused(
        with_(samples.resource_flavor(), "spec.nodeTaints", [taint, taint]), "spec.nodeTaints[1]", "unique"
    )
    other = dict(taint, effect="NoExecute")
    accepted(with_(samples.resource_flavor(), "spec.nodeTaints", [taint, other]))


def test_flavor_taint_effect_enum_and_required() -> None:
    taint = {"key": "spot", "effect": "Sometimes"}
    refused(
        with_(samples.resource_flavor(), "spec.nodeTaints", [taint]),
        "spec.nodeTaints[0].effect",
        "NoSchedule",
    )
    refused(
        with_(samples.resource_flavor(), "spec.nodeTaints", [{"key": "x"}]),
        "spec.nodeTaints[0].effect",
        "missing",
    )


def test_flavor_toleration_rules() -> None:
    path = "spec.tolerations"
    doc = samples.resource_flavor()
    refused(with_(doc, path, [{"value": "x"}]), f"{path}[0].operator", "must be Exists when 'key' is empty")
    refused(with_(doc, path, [{"key": "a", "tolerationSeconds": 5}]), f"{path}[0].effect", "NoExecute")
    refused(with_(doc, path, [{"key": "a", "operator": "Exists", "value": "x"}]), f"{path}[0].value", "empty")
    refused(with_(doc, path, [{"key": "a", "operator": "In"}]), f"{path}[0].operator", "'Exists' or 'Equal'")
    accepted(
        with_(
            doc, path, [{"operator": "Exists"}, {"key": "a", "effect": "NoExecute", "tolerationSeconds": 5}]
        )
    )


def test_topology_sample_is_valid() -> None:
    accepted(samples.topology())


def test_topology_levels_unique_and_hostname_last() -> None:
    levels = [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]
    refused(with_(samples.topology(), "spec.levels", levels), "spec.levels", "must be unique")
    levels = [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]
    refused(with_(samples.topology(), "spec.levels", levels), "spec.levels", "lowest level")


def test_topology_levels_between_1_and_16() -> None:
    refused(with_(samples.topology(), "spec.levels", []), "spec.levels", "at least 1")
    levels = [{"nodeLabel": f"l{i}"} for i in range(17)]
    refused(with_(samples.topology(), "spec.levels", levels), "spec.levels", "at most 16")


def test_multikueue_cluster_needs_exactly_one_source() -> None:
    refused(
        with_(samples.multikueue_cluster(), "spec.clusterSource", {}), "spec.clusterSource", "exactly one"
    )
    both = {"kubeConfig": {"location": "s"}, "clusterProfileRef": {"name": "p"}}
    refused(
        with_(samples.multikueue_cluster(), "spec.clusterSource", both), "spec.clusterSource", "exactly one"
    )


def test_multikueue_config_clusters_unique_and_bounded() -> None:
    refused(with_(samples.multikueue_config(), "spec.clusters", ["a", "a"]), "spec.clusters", "unique")
    refused(with_(samples.multikueue_config(), "spec.clusters", []), "spec.clusters", "at least 1")
    refused(
        with_(samples.multikueue_config(), "spec.clusters", [f"c{i}" for i in range(21)]),
        "spec.clusters",
        "20",
    )


def test_admission_check_needs_a_controller_name() -> None:
    refused(with_(samples.admission_check(), "spec.controllerName", ""), "spec.controllerName", "at least 1")
    refused(with_(samples.admission_check(), "spec", {}), "spec.controllerName", "missing")


def test_admission_check_parameters_reference_names() -> None:
    refused(
        with_(samples.admission_check(), "spec.parameters.name", "Bad"), "spec.parameters.name", "RFC 1123"
    )


def test_provisioning_request_config_rules() -> None:
    accepted(samples.provisioning_request_config())
    doc = with_(samples.provisioning_request_config(), "spec.podSetMergePolicy", "Whatever")
    refused(doc, "spec.podSetMergePolicy", "unsupported value")


def test_workload_priority_class_value_is_int32() -> None:
    accepted(samples.workload_priority_class())
    refused(with_(samples.workload_priority_class(), "value", 2**31), "value", "less than or equal")
    refused(with_(samples.workload_priority_class(), "value", DELETE), "value", "missing")


def test_local_queue_cluster_queue_name_format() -> None:
    accepted(samples.local_queue())
    refused(
        with_(samples.local_queue(), "spec.clusterQueue", "CQ"), "spec.clusterQueue", "RFC 1123 subdomain"
    )


def test_namespace_names_are_dns_labels() -> None:
    accepted(samples.namespace())
    refused(with_(samples.namespace(), "metadata.name", "a.b"), "metadata.name", "RFC 1123 label")


def test_object_name_is_required() -> None:
    refused(with_(samples.cohort(), "metadata.name", DELETE), "metadata.name", "required")


def test_labels_and_annotations_keys_are_checked() -> None:
    refused(with_(samples.cohort(), "metadata.labels", {"-bad": "x"}), "metadata.labels", "key '-bad'")
    refused(
        with_(samples.cohort(), "metadata.annotations", {"a/b/c": "x"}), "metadata.annotations", "key 'a/b/c'"
    )


def test_node_and_limit_range_and_job() -> None:
    accepted(samples.node())
    accepted(samples.limit_range())
    accepted(samples.job())
    refused(
        with_(samples.limit_range(), "spec.limits[0].type", "Namespace"), "spec.limits[0].type", "unsupported"
    )
