"""The CRDs generated from the models: structural, complete, and shaped like upstream's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from pykueue.api import crd

Schema = dict[str, Any]


def _stored_schema(name: str) -> Schema:
    manifest = next(m for m in crd.crds() if m["spec"]["names"]["kind"] == name)
    version = next(v for v in manifest["spec"]["versions"] if v["storage"])
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def _walk(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}" if path else name)
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


def _at(schema: Schema, path: str) -> Schema:
    return dict(_walk(schema))[path]


def _bare(schema: Schema) -> Schema:
    """The node without its description (for ``kubectl explain``; checked on its own)."""
    return {key: value for key, value in schema.items() if key != "description"}


KINDS = [kind.name for kind in crd.KINDS]


def test_one_crd_per_kueue_kind() -> None:
    assert sorted(KINDS) == sorted(
        [
            "ResourceFlavor",
            "ClusterQueue",
            "LocalQueue",
            "Cohort",
            "WorkloadPriorityClass",
            "AdmissionCheck",
            "ProvisioningRequestConfig",
            "MultiKueueConfig",
            "MultiKueueCluster",
            "Topology",
            "Workload",
        ]
    )
    names = [m["metadata"]["name"] for m in crd.crds()]
    assert names == crd.crd_names()
    assert "clusterqueues.kueue.x-k8s.io" in names and "topologies.kueue.x-k8s.io" in names


@pytest.mark.parametrize("kind", KINDS)
def test_schemas_are_structural(kind: str) -> None:
    for path, node in _walk(_stored_schema(kind)):
        typed = (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        )
        assert typed, f"{kind} {path}: no type"
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), f"{kind} {path}: anyOf outside int-or-string"
        assert "$ref" not in node and "title" not in node
        if node.get("x-kubernetes-list-type") == "map":
            item = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in item.get("required", []) or "default" in item["properties"][key], (
                    f"{kind} {path}: map key {key} neither required nor defaulted"
                )


def test_camel_case_names_types_enums_and_required() -> None:
    cq = _stored_schema("ClusterQueue")
    spec = cq["properties"]["spec"]
    assert {"resourceGroups", "cohortName", "queueingStrategy", "namespaceSelector"} <= set(
        spec["properties"]
    )
    strategy = dict(spec["properties"]["queueingStrategy"])
    assert strategy.pop("description").startswith("StrictFIFO: the head blocks the queue")
    assert strategy == {
        "type": "string",
        "enum": ["StrictFIFO", "BestEffortFIFO"],
        "default": "BestEffortFIFO",
    }
    group = _at(cq, "spec.resourceGroups[]")
    assert group["required"] == ["coveredResources", "flavors"]
    assert group["properties"]["flavors"]["maxItems"] == 64
    assert _at(cq, "spec.resourceGroups")["maxItems"] == 16
    # Integers carry their Go width as a format, without bounds that only restate it.
    assert _bare(_at(cq, "status.pendingWorkloads")) == {"type": "integer", "format": "int32"}
    assert _bare(_at(_stored_schema("Workload"), "spec.podSets[].count")) == {
        "type": "integer",
        "format": "int32",
        "minimum": 0,
        "default": 1,
    }
    assert _at(_stored_schema("Workload"), "status.conditions[].lastTransitionTime") == {
        "type": "string",
        "format": "date-time",
    }


def test_quantities_are_int_or_string_with_the_quantity_pattern() -> None:
    quota = _at(_stored_schema("ClusterQueue"), "spec.resourceGroups[].flavors[].resources[].nominalQuota")
    assert quota["x-kubernetes-int-or-string"] is True
    assert quota["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    pattern = re.compile(quota["pattern"])
    assert all(pattern.match(text) for text in ("1", "500m", "1.5Gi", "+2", "1e3"))
    assert not any(pattern.match(text) for text in ("-1", "lots", "1.5Gb"))
    assert quota["minimum"] == 0 and quota["default"] == "0"
    # Usage in status may be any quantity (the general pattern, with a sign).
    usage = _at(_stored_schema("ClusterQueue"), "status.flavorsUsage[].resources[].total")
    assert usage["pattern"] == crd.QUANTITY_PATTERN
    assert re.match(usage["pattern"], "-1")


def test_nested_defaults_make_the_server_fill_in_what_our_models_do() -> None:
    spec = _stored_schema("ClusterQueue")["properties"]["spec"]
    assert spec["default"] == {}
    preemption = spec["properties"]["preemption"]
    assert preemption["default"] == {}
    assert preemption["properties"]["borrowWithinCohort"]["default"] == {}
    assert preemption["properties"]["borrowWithinCohort"]["properties"]["policy"]["default"] == "Never"
    # An optional struct without defaults of its own gets none, and status never does.
    assert "default" not in spec["properties"]["admissionChecksStrategy"]
    assert "default" not in _stored_schema("ClusterQueue")["properties"]["status"]
    # Empty-string defaults (Go's zero values) are not written.
    assert "default" not in spec["properties"]["cohortName"]


def test_list_types_and_cel_rules_like_upstream() -> None:
    cq = _stored_schema("ClusterQueue")
    assert _at(cq, "spec.resourceGroups")["x-kubernetes-list-type"] == "atomic"
    assert _at(cq, "spec.resourceGroups[].flavors")["x-kubernetes-list-map-keys"] == ["name"]
    assert _at(cq, "status.conditions")["x-kubernetes-list-map-keys"] == ["type"]
    messages = [rule["message"] for rule in cq["properties"]["spec"]["x-kubernetes-validations"]]
    assert messages == ["borrowingLimit must be nil when cohort is empty"]
    lq = _stored_schema("LocalQueue")
    assert _at(lq, "spec.clusterQueue")["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"
    rf = _stored_schema("ResourceFlavor")
    assert len(_at(rf, "spec.tolerations")["x-kubernetes-validations"]) == 3
    # Core types read only in part keep what they do not model.
    template = _at(_stored_schema("Workload"), "spec.podSets[].template.spec")
    assert template["x-kubernetes-preserve-unknown-fields"] is True


def test_scope_short_names_columns_and_subresources() -> None:
    by_kind = {m["spec"]["names"]["kind"]: m for m in crd.crds()}
    scopes = {kind for kind, m in by_kind.items() if m["spec"]["scope"] == "Namespaced"}
    assert scopes == {"LocalQueue", "Workload"}
    cq = by_kind["ClusterQueue"]["spec"]
    assert cq["names"]["shortNames"] == ["cq"]
    v1beta2, v1beta1 = cq["versions"]
    assert (v1beta2["name"], v1beta2["served"], v1beta2["storage"]) == ("v1beta2", True, True)
    assert (v1beta1["name"], v1beta1["served"], v1beta1["storage"]) == ("v1beta1", True, False)
    assert [c["name"] for c in v1beta2["additionalPrinterColumns"]] == [
        "Cohort",
        "Strategy",
        "Pending Workloads",
        "Admitted Workloads",
    ]
    assert v1beta2["additionalPrinterColumns"][0]["jsonPath"] == ".spec.cohortName"
    assert v1beta1["additionalPrinterColumns"][0]["jsonPath"] == ".spec.cohort"
    assert v1beta2["subresources"] == {"status": {}}
    assert "subresources" not in by_kind["ResourceFlavor"]["spec"]["versions"][0]
    wpc = by_kind["WorkloadPriorityClass"]["spec"]["versions"][0]
    assert wpc["schema"]["openAPIV3Schema"]["required"] == ["value"]


def test_conversion_strategy_follows_the_webhook_argument() -> None:
    assert all(m["spec"]["conversion"] == {"strategy": "None"} for m in crd.crds())
    service = crd.WebhookClientConfig(service_namespace="kueue-system", ca_bundle=b"PEM")
    conversion = crd.crds(service)[1]["spec"]["conversion"]
    assert conversion == {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {
                "service": {
                    "namespace": "kueue-system",
                    "name": "pykueue-webhook-service",
                    "path": "/convert",
                    "port": 443,
                },
                "caBundle": "UEVN",
            },
        },
    }
    url = crd.WebhookClientConfig(url="https://127.0.0.1:9443/")
    assert crd.crds(url)[0]["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/convert"
    }


def test_types_without_a_structural_schema_are_refused() -> None:
    with pytest.raises(crd.SchemaError, match="union"):
        crd.type_schema(int | str)


def test_v1beta1_schema_is_open_only_where_the_versions_differ() -> None:
    by_kind = {m["spec"]["names"]["kind"]: m for m in crd.crds()}
    v1beta1 = by_kind["ClusterQueue"]["spec"]["versions"][1]["schema"]["openAPIV3Schema"]
    assert v1beta1["properties"]["spec"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert by_kind["ClusterQueue"]["spec"]["versions"][1]["subresources"] == {"status": {}}
    wpc = by_kind["WorkloadPriorityClass"]["spec"]["versions"][1]["schema"]["openAPIV3Schema"]
    assert wpc["required"] == ["value"]
    assert _bare(wpc["properties"]["value"]) == {"type": "integer", "format": "int32"}
