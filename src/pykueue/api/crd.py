"""CustomResourceDefinitions for every Kueue kind, generated from the models.

The models are the one description of the API: `crds()` walks their type hints and
turns them into the structural OpenAPI v3 schemas the API server wants, so a field
added to a model appears in the CRD without a second copy to keep in step.

How a Python type becomes a schema:

* ``str``/``int``/``bool``/``datetime`` -> ``string``/``integer``/``boolean``/
  ``string`` with ``format: date-time``; a ``Literal`` -> an ``enum``;
  ``X | None`` -> the schema of ``X`` (Go's ``omitempty``: absent, never null);
* `meta.Quantity` -> ``x-kubernetes-int-or-string`` with the Kubernetes quantity
  pattern, as upstream's ``resource.Quantity`` fields;
* ``list[X]`` / ``dict[str, X]`` -> ``array`` / ``object`` with
  ``additionalProperties``; ``Any`` -> ``x-kubernetes-preserve-unknown-fields``;
* a model -> an ``object`` whose properties are the camelCase field names;
  ``required`` lists the fields without a default; a `meta.PassthroughModel` (the core
  types we read only in part, such as PodSpec) keeps unknown fields;
* ``Field(min_length=..., ge=..., pattern=...)`` -> ``minItems``/``minLength``,
  ``minimum``, ``pattern``...;
* a field default that Go would write (not empty) -> ``default``; a nested model whose
  defaults are not all empty (ClusterQueue ``preemption``) -> ``default: {}``, so the
  API server fills in its children exactly as our models do.

What types cannot say comes from a small table per kind (`_EXTRAS`): the list types
and map keys upstream declares (they decide how server-side apply merges lists),
upstream's CEL rules (written here in our words), atomic maps. Rules that need more
than one object, or are easier to explain in Python, stay in `validation` and are
enforced by the validating webhook.

v1beta2 is served and stored. v1beta1 is served with an open schema (its objects are
converted to v1beta2 by the conversion webhook, which validates them there); when no
webhook is given the conversion strategy is ``None``, which is only good for tests.

This module is pure: it builds dictionaries and does no I/O.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import types
import typing
from collections.abc import Mapping
from typing import Any, Final, Literal

import annotated_types
import pydantic
import pydantic_core
from pydantic.fields import FieldInfo

from pykueue.api import meta
from pykueue.api.admission_check import AdmissionCheck, ProvisioningRequestConfig
from pykueue.api.cluster_queue import ClusterQueue
from pykueue.api.cohort import Cohort
from pykueue.api.local_queue import LocalQueue
from pykueue.api.multikueue import MultiKueueCluster, MultiKueueConfig
from pykueue.api.priority import WorkloadPriorityClass
from pykueue.api.resource_flavor import ResourceFlavor
from pykueue.api.topology import Topology
from pykueue.api.workload import Workload

GROUP: Final = "kueue.x-k8s.io"
STORED_VERSION: Final = "v1beta2"
SERVED_VERSIONS: Final = ("v1beta2", "v1beta1")
CONVERSION_PATH: Final = "/convert"

# k8s.io/apimachinery's quantity grammar (sign, digits, one suffix or an exponent).
QUANTITY_PATTERN: Final = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"

NON_NEGATIVE_QUANTITY_PATTERN: Final = "^\\+?" + QUANTITY_PATTERN.removeprefix(r"^(\+|-)?")

Schema = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class WebhookClientConfig:
    """Where the API server reaches pykueue's webhooks: a Service in the cluster, or a URL.

    `url` (``https://127.0.0.1:9443``, no path) is for a webhook server outside the
    cluster, as in tests; otherwise `service_namespace`/`service_name`/`service_port`
    name the Service in front of the controller. `ca_bundle` is the PEM of the CA that
    signed the serving certificate (empty: the controller patches it in at start).
    """

    service_namespace: str = "kueue-system"
    service_name: str = "pykueue-webhook-service"
    service_port: int = 443
    url: str = ""
    ca_bundle: bytes = b""

    def client_config(self, path: str) -> dict[str, Any]:
        """The ``clientConfig`` of a webhook or a CRD conversion for one URL path."""
        config: dict[str, Any]
        if self.url:
            config = {"url": self.url.rstrip("/") + path}
        else:
            config = {
                "service": {
                    "namespace": self.service_namespace,
                    "name": self.service_name,
                    "path": path,
                    "port": self.service_port,
                }
            }
        if self.ca_bundle:
            config["caBundle"] = _base64(self.ca_bundle)
        return config


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0

    def to_wire(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.priority:
            column["priority"] = self.priority
        return column


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a CRD says besides the schema: names, scope, printer columns."""

    model: type[meta.KubeModel]
    plural: str
    short_names: tuple[str, ...] = ()
    namespaced: bool = False
    columns: tuple[Column, ...] = ()
    # Printer columns of v1beta1 where the field had another name.
    v1beta1_columns: tuple[Column, ...] | None = None
    status: bool = True

    @property
    def name(self) -> str:
        return self.model.__name__


_AGE: Final = Column("Age", ".metadata.creationTimestamp", "date", "Time this object was created")


def _cluster_queue_columns(cohort_path: str) -> tuple[Column, ...]:
    """ClusterQueue's printer columns; only the cohort's field differs between API versions."""
    return (
        Column("Cohort", cohort_path, description="Cohort this ClusterQueue belongs to"),
        Column("Strategy", ".spec.queueingStrategy", description="Queueing strategy", priority=1),
        Column("Pending Workloads", ".status.pendingWorkloads", "integer", "Pending workloads"),
        Column(
            "Admitted Workloads",
            ".status.admittedWorkloads",
            "integer",
            "Admitted workloads that have not finished",
            priority=1,
        ),
    )


KINDS: Final[tuple[Kind, ...]] = (
    Kind(ResourceFlavor, "resourceflavors", ("flavor", "flavors", "rf"), status=False),
    Kind(
        ClusterQueue,
        "clusterqueues",
        ("cq",),
        columns=_cluster_queue_columns(".spec.cohortName"),
        v1beta1_columns=_cluster_queue_columns(".spec.cohort"),
    ),
    Kind(
        LocalQueue,
        "localqueues",
        ("queue", "queues", "lq"),
        namespaced=True,
        columns=(
            Column("ClusterQueue", ".spec.clusterQueue", description="Backing ClusterQueue"),
            Column("Pending Workloads", ".status.pendingWorkloads", "integer", "Pending workloads"),
            Column(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                "Admitted workloads not finished",
            ),
        ),
    ),
    Kind(Cohort, "cohorts", ("co",)),
    Kind(
        WorkloadPriorityClass,
        "workloadpriorityclasses",
        ("wpc",),
        columns=(Column("Value", ".value", "integer", "Priority value"),),
        status=False,
    ),
    Kind(AdmissionCheck, "admissionchecks", ("ac",)),
    Kind(ProvisioningRequestConfig, "provisioningrequestconfigs", ("prc",), status=False),
    Kind(MultiKueueConfig, "multikueueconfigs", ("mkconf",), status=False),
    Kind(
        MultiKueueCluster,
        "multikueueclusters",
        ("mkc",),
        columns=(
            Column("Connected", ".status.conditions[?(@.type=='Active')].status", description="Connected"),
            _AGE,
        ),
    ),
    Kind(Topology, "topologies", ("topo",), status=False),
    Kind(
        Workload,
        "workloads",
        ("kwl", "kueueworkload", "kueueworkloads"),
        namespaced=True,
        columns=(
            Column("Queue", ".spec.queueName", description="LocalQueue the workload was submitted to"),
            Column(
                "Reserved in", ".status.admission.clusterQueue", description="ClusterQueue holding its quota"
            ),
            Column("Admitted", ".status.conditions[?(@.type=='Admitted')].status", description="Admitted"),
            Column("Finished", ".status.conditions[?(@.type=='Finished')].status", description="Finished"),
            _AGE,
        ),
    ),
)

# --- what the types cannot say ----------------------------------------------------------
#
# Paths are dotted camelCase names from the object root; ``[]`` steps into list items.

_Extras = Mapping[str, Mapping[str, Any]]


def _rule(rule: str, message: str, field_path: str = "") -> dict[str, str]:
    out = {"rule": rule, "message": message}
    if field_path:
        out["fieldPath"] = field_path
    return out


def _map_list(*keys: str) -> dict[str, Any]:
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


_ATOMIC: Final = {"x-kubernetes-list-type": "atomic"}
_SET: Final = {"x-kubernetes-list-type": "set"}
_IMMUTABLE: Final = {"x-kubernetes-validations": [_rule("self == oldSelf", "field is immutable")]}
# A quota is never negative: no leading minus in text, no negative number. (A CEL rule
# would read better but costs too much over 16 x 64 x 64 unbounded strings.)
_NON_NEGATIVE: Final = {"pattern": NON_NEGATIVE_QUANTITY_PATTERN, "minimum": 0}
_UNIQUE_ITEMS: Final = _rule("self.all(a, self.exists_one(b, b == a))", "must be unique")

_TOLERATION_RULES: Final = {
    "x-kubernetes-list-type": "atomic",
    "x-kubernetes-validations": [
        _rule(
            "self.all(t, has(t.key) || (has(t.operator) && t.operator == 'Exists'))",
            "operator must be Exists when key is empty (which tolerates every taint)",
        ),
        _rule(
            "self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",
            "tolerationSeconds needs effect NoExecute",
        ),
        _rule(
            "self.all(t, !(has(t.operator) && t.operator == 'Exists') || !has(t.value))",
            "value must be empty when operator is Exists",
        ),
    ],
}

_CONDITIONS: Final = _map_list("type")


def _quota_table(prefix: str) -> dict[str, Mapping[str, Any]]:
    """Resource groups, shared by ClusterQueue and Cohort."""
    groups = f"{prefix}.resourceGroups"
    return {
        groups: _ATOMIC,
        f"{groups}[]": {
            "x-kubernetes-validations": [
                _rule(
                    "self.flavors.all(f, size(f.resources) == size(self.coveredResources))",
                    "each flavor must list as many resources as coveredResources",
                )
            ]
        },
        f"{groups}[].coveredResources": _ATOMIC,
        f"{groups}[].flavors": _map_list("name"),
        f"{groups}[].flavors[].resources": _map_list("name"),
        f"{groups}[].flavors[].resources[].nominalQuota": _NON_NEGATIVE,
        f"{groups}[].flavors[].resources[].borrowingLimit": _NON_NEGATIVE,
        f"{groups}[].flavors[].resources[].lendingLimit": _NON_NEGATIVE,
    }


def _usage(prefix: str) -> dict[str, Mapping[str, Any]]:
    return {
        f"{prefix}.flavorsReservation": _map_list("name"),
        f"{prefix}.flavorsReservation[].resources": _map_list("name"),
        f"{prefix}.flavorsUsage": _map_list("name"),
        f"{prefix}.flavorsUsage[].resources": _map_list("name"),
    }


_SELECTOR: Final = {
    "spec.namespaceSelector": {"x-kubernetes-map-type": "atomic"},
    "spec.namespaceSelector.matchExpressions": _ATOMIC,
    "spec.namespaceSelector.matchExpressions[].values": _ATOMIC,
}

_EXTRAS: Final[dict[str, _Extras]] = {
    "ClusterQueue": {
        "spec": {
            "x-kubernetes-validations": [
                _rule(
                    "has(self.cohortName) || !has(self.resourceGroups) || self.resourceGroups.all(g, "
                    "g.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit))))",
                    "borrowingLimit must be nil when cohort is empty",
                )
            ]
        },
        **_quota_table("spec"),
        **_SELECTOR,
        "spec.flavorFungibility": {
            "x-kubernetes-validations": [
                _rule(
                    "!has(self.preference) || "
                    "(self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')",
                    "preference can only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor",
                )
            ]
        },
        "spec.preemption": {
            "x-kubernetes-validations": [
                _rule(
                    "self.reclaimWithinCohort != 'Never' || !has(self.borrowWithinCohort) "
                    "|| self.borrowWithinCohort.policy == 'Never'",
                    "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                )
            ]
        },
        "spec.admissionChecksStrategy.admissionChecks": _map_list("name"),
        "spec.admissionChecksStrategy.admissionChecks[].onFlavors": _SET,
        "status.conditions": _CONDITIONS,
        **_usage("status"),
    },
    "Cohort": {**_quota_table("spec")},
    "LocalQueue": {
        "spec.clusterQueue": _IMMUTABLE,
        "status.conditions": _CONDITIONS,
        **_usage("status"),
    },
    "ResourceFlavor": {
        "spec": {
            "x-kubernetes-validations": [
                _rule(
                    "!has(self.topologyName) || (has(self.nodeLabels) && size(self.nodeLabels) >= 1)",
                    "at least one nodeLabel is required when topology is set",
                ),
                _rule(
                    "!has(oldSelf.topologyName) || "
                    "(has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
                    "topologyName is immutable when topologyName is set",
                ),
            ]
        },
        "spec.nodeLabels": {"x-kubernetes-map-type": "atomic"},
        "spec.nodeTaints": _ATOMIC,
        "spec.tolerations": _TOLERATION_RULES,
    },
    "AdmissionCheck": {"spec.controllerName": _IMMUTABLE, "status.conditions": _CONDITIONS},
    "ProvisioningRequestConfig": {"spec.managedResources": _SET},
    "MultiKueueConfig": {
        "spec.clusters": {"x-kubernetes-list-type": "atomic", "x-kubernetes-validations": [_UNIQUE_ITEMS]},
        # Bounded so that the uniqueness rule fits the CEL cost budget (as upstream).
        "spec.clusters[]": {"maxLength": 256},
    },
    "MultiKueueCluster": {
        "spec.clusterSource": {
            "x-kubernetes-validations": [
                _rule(
                    "has(self.kubeConfig) != has(self.clusterProfileRef)",
                    "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
                )
            ]
        },
        "status.conditions": _CONDITIONS,
    },
    "Topology": {
        "spec.levels": {
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": [
                _rule(
                    "self == oldSelf || (self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname' "
                    "&& oldSelf[size(oldSelf) - 1].nodeLabel == 'kubernetes.io/hostname')",
                    "levels are mutable only when kubernetes.io/hostname is the lowest level "
                    "both before and after the change",
                ),
                _UNIQUE_ITEMS,
                _rule(
                    "self.all(l, l.nodeLabel != 'kubernetes.io/hostname') "
                    "|| self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",
                    "the kubernetes.io/hostname label can only be used at the lowest level of topology",
                ),
            ],
        },
    },
    "Workload": {
        "spec.podSets": _map_list("name"),
        "spec.podSets[]": {
            "x-kubernetes-validations": [
                _rule(
                    "!has(self.minCount) || self.minCount <= self.count",
                    "minCount should be positive and less or equal to count",
                )
            ]
        },
        "spec.preemptionGates": _map_list("name"),
        "spec.priorityClassRef": {
            "x-kubernetes-validations": [
                _rule(
                    "self.group != 'scheduling.k8s.io' || self.kind == 'PriorityClass'",
                    "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
                ),
                _rule(
                    "self.group != 'kueue.x-k8s.io' || self.kind == 'WorkloadPriorityClass'",
                    "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
                ),
            ]
        },
        "status": {
            "x-kubernetes-validations": [
                _rule(
                    "!has(oldSelf.clusterName) || !has(self.clusterName) || oldSelf.clusterName == self.clusterName",
                    "clusterName is immutable once set",
                ),
                _rule(
                    "!has(self.clusterName) || !has(self.nominatedClusterNames) "
                    "|| size(self.nominatedClusterNames) == 0",
                    "clusterName and nominatedClusterNames are mutually exclusive",
                ),
            ]
        },
        "status.conditions": _CONDITIONS,
        "status.admission.podSetAssignments": _map_list("name"),
        "status.admissionChecks": _map_list("name"),
        "status.admissionChecks[].podSetUpdates": _ATOMIC,
        "status.admissionChecks[].podSetUpdates[].tolerations": _TOLERATION_RULES,
        "status.reclaimablePods": _map_list("name"),
        "status.resourceRequests": _map_list("name"),
        "status.preemptionGates": _map_list("name"),
        "status.unhealthyNodes": _map_list("name"),
        "status.nominatedClusterNames": _ATOMIC,
    },
}

# --- types -> schemas ------------------------------------------------------------------


class SchemaError(TypeError):
    """A model uses a type that has no structural schema (a bug in the model or here)."""


def quantity_schema() -> Schema:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def _constraints(schema: Schema, metadata: list[Any]) -> None:
    """Copy pydantic/annotated-types constraints onto a schema of the right type."""
    kind = schema.get("type")
    for item in metadata:
        if isinstance(item, FieldInfo):
            _constraints(schema, list(item.metadata))
        elif isinstance(item, annotated_types.MinLen):
            schema[
                "minItems" if kind == "array" else "minProperties" if kind == "object" else "minLength"
            ] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            schema[
                "maxItems" if kind == "array" else "maxProperties" if kind == "object" else "maxLength"
            ] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif isinstance(item, annotated_types.Gt):
            schema["minimum"] = item.gt
            schema["exclusiveMinimum"] = True
        elif isinstance(item, annotated_types.Lt):
            schema["maximum"] = item.lt
            schema["exclusiveMaximum"] = True
        else:
            pattern = getattr(item, "pattern", None)
            if isinstance(pattern, str) and kind == "string":
                schema["pattern"] = pattern
    if kind == "integer":
        if any(key in schema for key in ("minimum", "maximum")):
            _integer_format(schema)
        else:
            schema.setdefault("format", "int64")


def _integer_format(schema: Schema) -> None:
    # Bounds that only restate the Go type become its format: the API server refuses
    # int64 bounds (they do not survive a float), and int32 ones are noise.
    low, high = schema.get("minimum"), schema.get("maximum")
    if high is None:  # bounds seen before and already folded into the format
        int32 = schema.get("format") == "int32"
    else:
        int32 = high <= meta.INT32_MAX and (low is None or low >= -(2**31))
    schema["format"] = "int32" if int32 else "int64"
    if low in (-(2**31), -(2**63)):
        del schema["minimum"]
    if high in (meta.INT32_MAX, 2**63 - 1):
        del schema["maximum"]


def type_schema(hint: Any) -> Schema:
    """The structural schema of one type hint (see the module docstring)."""
    if hint == meta.Quantity:
        return quantity_schema()
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(hint)
        schema = type_schema(base)
        _constraints(schema, metadata)
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(options) != 1:
            raise SchemaError(f"{hint!r}: a union of several types has no structural schema")
        return type_schema(options[0])
    if origin is Literal:
        values = list(typing.get_args(hint))
        if not all(isinstance(value, str) for value in values):
            raise SchemaError(f"{hint!r}: only string enums are supported")
        return {"type": "string", "enum": values}
    if origin is list:
        (item,) = typing.get_args(hint)
        return {"type": "array", "items": type_schema(item)}
    if origin is dict:
        _, value = typing.get_args(hint)
        if value is Any:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        return {"type": "object", "additionalProperties": type_schema(value)}
    if hint is Any:
        return {"x-kubernetes-preserve-unknown-fields": True}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is str:
        return {"type": "string"}
    if hint is datetime.datetime:
        return {"type": "string", "format": "date-time"}
    if isinstance(hint, type) and issubclass(hint, pydantic.BaseModel):
        return model_schema(hint)
    raise SchemaError(f"{hint!r}: no schema for this type")


def _default(field: FieldInfo) -> Any:
    """The ``default`` of a field as the API server should apply it, or None for none."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, meta.KubeModel) and value.to_wire():
            return {}
        return None
    value = field.default
    if value is None or value is pydantic_core.PydanticUndefined or value in ("", [], {}):
        return None
    if isinstance(value, str | int | bool):
        return value
    return None


def description_of(model: type[pydantic.BaseModel]) -> str:
    """The first paragraph of the model's own docstring, on one line ("" without one)."""
    doc = model.__dict__.get("__doc__") or ""
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def model_schema(model: type[pydantic.BaseModel]) -> Schema:
    """The object schema of a model: camelCase properties, required fields, defaults.

    Descriptions, for ``kubectl explain``: a field's ``Field(description=...)``, else, for
    a field holding a model, that model's docstring (its first paragraph).
    """
    hints = typing.get_type_hints(model, include_extras=True)
    properties: dict[str, Schema] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        wire = field.alias or name
        schema = type_schema(hints[name])
        _constraints(schema, list(field.metadata))
        default = _default(field)
        if default is not None:
            schema["default"] = default
        if field.description:
            schema["description"] = " ".join(field.description.split())
        if field.is_required():
            required.append(wire)
        properties[wire] = schema
    out: Schema = {"type": "object", "properties": properties}
    if description := description_of(model):
        out["description"] = description
    if required:
        out["required"] = required
    if model.model_config.get("extra") == "allow":
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _at(schema: Schema, path: str) -> Schema:
    node = schema
    for step in path.split("."):
        items = step.endswith("[]")
        name = step.removesuffix("[]")
        try:
            node = node["properties"][name]
            if items:
                node = node["items"]
        except KeyError:
            raise SchemaError(f"no field {path!r} in the schema") from None
    return node


def object_schema(kind: Kind) -> Schema:
    """The v1beta2 ``openAPIV3Schema`` of one kind."""
    schema = model_schema(kind.model)
    props = schema["properties"]
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    # The API server fills these in; a manifest need not carry them.
    schema["required"] = [
        name for name in schema.get("required", []) if name not in ("apiVersion", "kind", "metadata")
    ]
    if not schema["required"]:
        del schema["required"]
    props.get("status", {}).pop("default", None)
    for path, extra in _EXTRAS.get(kind.name, {}).items():
        node = _at(schema, path)
        for key, value in extra.items():
            if key == "x-kubernetes-validations":
                node.setdefault(key, []).extend(dict(rule) for rule in value)
            else:
                node[key] = value
    return schema


def _open_schema(kind: Kind) -> Schema:
    """v1beta1: spec and status left open (their objects are converted by the webhook and
    validated there as v1beta2); top-level fields that did not change between the
    versions (WorkloadPriorityClass ``value``) keep their v1beta2 schema."""
    stored = object_schema(kind)
    open_object: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    props = {
        name: open_object if name in ("spec", "status") else node
        for name, node in stored["properties"].items()
    }
    schema: Schema = {"type": "object", "properties": props}
    required = [name for name in stored.get("required", []) if name not in ("spec", "status")]
    if required:
        schema["required"] = required
    return schema


def crd(
    kind: Kind, webhook: WebhookClientConfig | None = None, v1beta1_served: bool = True
) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind (``v1beta1_served``: see `crds`)."""
    versions = []
    for version in SERVED_VERSIONS:
        stored = version == STORED_VERSION
        entry: dict[str, Any] = {
            "name": version,
            "served": stored or v1beta1_served,
            "storage": stored,
            "schema": {"openAPIV3Schema": object_schema(kind) if stored else _open_schema(kind)},
        }
        columns = kind.columns if stored or kind.v1beta1_columns is None else kind.v1beta1_columns
        if columns:
            entry["additionalPrinterColumns"] = [column.to_wire() for column in columns]
        if kind.status and "status" in entry["schema"]["openAPIV3Schema"]["properties"]:
            entry["subresources"] = {"status": {}}
        versions.append(entry)
    conversion: dict[str, Any] = {"strategy": "None"}
    if webhook is not None:
        conversion = {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": webhook.client_config(CONVERSION_PATH),
            },
        }
    singular = kind.name.lower()
    names: dict[str, Any] = {
        "kind": kind.name,
        "listKind": f"{kind.name}List",
        "plural": kind.plural,
        "singular": singular,
        "categories": ["kueue"],
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}", "labels": {"app.kubernetes.io/name": "pykueue"}},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": versions,
            "conversion": conversion,
        },
    }


def crds(webhook: WebhookClientConfig | None = None, v1beta1_served: bool = True) -> list[dict[str, Any]]:
    """A CustomResourceDefinition for every Kueue kind, in a stable order.

    With `webhook`, v1beta1 is converted by pykueue's conversion webhook at
    ``<webhook>/convert``; without, the conversion strategy is ``None``, which only
    renames the apiVersion: a v1beta1 object's renamed fields (ClusterQueue ``cohort``...)
    would be pruned. ``v1beta1_served=False`` (what `pykueue install --crds-only` applies)
    has the API server refuse v1beta1 instead, until a conversion webhook is there.
    """
    return [crd(kind, webhook, v1beta1_served) for kind in KINDS]


def crd_names() -> list[str]:
    """``<plural>.kueue.x-k8s.io`` of every kind (what RBAC and caBundle patching name)."""
    return [f"{kind.plural}.{GROUP}" for kind in KINDS]
