"""Kueue's Configuration (``config.kueue.x-k8s.io`` v1beta1 or v1beta2): the one reader of it.

Every place a configuration comes from is read here, once, into one typed
`Configuration`: the controller's ``--config`` file and ``pykueue manifests
--config`` (`load`, `parse`: a whole document), a simulator design's
Configuration, and the parts of other files that hold its sections, a scenario's
``config`` and the standalone server's config file (`parse_sections`). The
engine's settings are derived from the typed object
(`pykueue.engine.configuration.engine_config`), the job framework's, MultiKueue's
and the retention policy's by their modules.

Modelled field by field where pykueue acts on it: which jobs are managed
(``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector``), which kinds
(``integrations``), how pod requests become quota (``resources``), fair sharing and
admission fair sharing, ``waitForPodsReady``, feature gates (a name no Kueue
release has is refused), MultiKueue, ``objectRetentionPolicies`` and pykueue's own
``pykueue`` section. Sections of upstream's file that concern its Go manager
(``webhook``, ``metrics``, ``leaderElection``, ``clientConnection``...) are
accepted as written, so an upstream configuration file loads unchanged;
`Configuration.ignored_sections` names them. Any other key is refused.

A caller that reads only some sections says which (``accept``); any other is
refused by name. A problem is a `ValidationError` whose paths are the file's
(``integrations.frameworks[2]``, or ``config.pykueue.nominalFirst`` in a scenario).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

import pydantic
import yaml
from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, field_validator, model_validator
from pydantic_core import PydanticCustomError

from pykueue.api import gate_support, governance, manifests
from pykueue.api.feature_gates import KNOWN_GATES
from pykueue.api.governance import PreemptionContract, PreemptionCost, Reservation
from pykueue.api.meta import KubeModel, LabelSelector, LabelSelectorRequirement
from pykueue.api.quantity import parse as parse_milli
from pykueue.errors import FieldProblem, ParseError, ValidationError

_P = TypeVar("_P")

GROUP: Final = "config.kueue.x-k8s.io"
V1BETA2: Final = "config.kueue.x-k8s.io/v1beta2"
V1BETA1: Final = "config.kueue.x-k8s.io/v1beta1"
API_VERSIONS: Final = (V1BETA2, V1BETA1)
DEFAULT_NAMESPACE: Final = "kueue-system"

# A Go duration as time.ParseDuration reads them (90s, 1h30m, 250ms, 0), never negative:
# one rule for every duration of the file, so that no section accepts what another refuses.
_GO_DURATION: Final = re.compile(r"^(0|([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+)$")


def _nested(at: str, message: str) -> PydanticCustomError:
    """A problem below the field being validated; ``at`` (``.x``, ``[1].input``) is added to
    its path when the error is reported (`_problems`)."""
    return PydanticCustomError("nested_field", "{message}", {"message": message, "at": at})


def _go_duration(text: str) -> str:
    if not _GO_DURATION.match(text):
        raise ValueError(f"{text!r} is not a duration (expected e.g. 90s, 1h30m, 250ms)")
    return text


Duration = Annotated[str, AfterValidator(_go_duration)]


class Integrations(KubeModel):
    frameworks: list[str] = Field(default_factory=list)
    external_frameworks: list[str] = Field(default_factory=list)
    label_keys_to_copy: list[str] = Field(default_factory=list)
    # v1beta1 only, deprecated there: the pod integration's namespace selector.
    pod_options: dict[str, Any] | None = None


class DeviceClassMapping(KubeModel):
    """DRA: devices of these DeviceClasses are charged as the quota resource ``name``."""

    name: str
    device_class_names: list[str] = Field(min_length=1, max_length=8)
    sources: list[dict[str, Any]] = Field(default_factory=list)


def _quantities(raw: Any) -> Any:
    """A transformation's outputs as milli-units; a quantity that does not parse is named."""
    if not isinstance(raw, Mapping):
        return raw  # the dict type refuses it
    found: dict[str, int] = {}
    for name, value in raw.items():
        try:
            found[str(name)] = parse_milli(str(value))
        except ValueError as exc:
            raise _nested(f".{name}", str(exc)) from None
    return found


class ResourceTransformation(KubeModel):
    """``resources.transformations[]``: ``outputs`` are milli-units per unit of ``input``."""

    input: str = Field(min_length=1)
    strategy: str = "Retain"
    outputs: Annotated[dict[str, int], BeforeValidator(_quantities)] = Field(default_factory=dict)
    multiply_by: str = ""

    @field_validator("strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        if value not in ("Retain", "Replace"):
            raise ValueError(f"must be Retain or Replace, got {value!r}")
        return value


# Upstream's resources.quotaCheckStrategy: pykueue implements its default only (every
# resource a workload requests must be covered by its ClusterQueue); IgnoreUndeclared is
# refused rather than read as the default.
QUOTA_CHECK_DEFAULT: Final = "BlockUndeclared"


def quota_check_problem(value: Any) -> str | None:
    """Why pykueue refuses this ``quotaCheckStrategy``, or None."""
    if value is None or value == QUOTA_CHECK_DEFAULT:
        return None
    return (
        f"unsupported value {value!r}: pykueue implements only {QUOTA_CHECK_DEFAULT!r} (upstream's default, "
        "every requested resource must be covered by the ClusterQueue)"
    )


class Resources(KubeModel):
    quota_check_strategy: str | None = None

    @pydantic.field_validator("quota_check_strategy")
    @classmethod
    def _supported_strategy(cls, value: str | None) -> str | None:
        problem = quota_check_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    exclude_resource_prefixes: list[str] = Field(default_factory=list)
    transformations: list[ResourceTransformation] = Field(default_factory=list)
    device_class_mappings: list[DeviceClassMapping] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _one_rule_per_input(self) -> Resources:
        seen: set[str] = set()
        for i, rule in enumerate(self.transformations):
            if rule.input in seen:
                raise _nested(f".transformations[{i}].input", f"{rule.input!r} is transformed twice")
            seen.add(rule.input)
        return self


STRATEGIES: Final = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


class FairSharing(KubeModel):
    enable: bool = False
    # Empty: upstream's default, both strategies in this order.
    preemption_strategies: list[str] = Field(default_factory=list)

    @field_validator("preemption_strategies")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for i, strategy in enumerate(value):
            if strategy not in STRATEGIES:
                raise _nested(f"[{i}]", f"unknown {strategy!r} (known: {', '.join(STRATEGIES)})")
        return value


class AdmissionFairSharing(KubeModel):
    usage_half_life_time: Duration = "168h"
    usage_sampling_interval: Duration = "5m"
    resource_weights: dict[str, float] = Field(default_factory=dict)


class RequeuingStrategy(KubeModel):
    timestamp: str = "Eviction"
    backoff_base_seconds: int = Field(default=60, ge=0)
    backoff_max_seconds: int = Field(default=3600, ge=0)
    backoff_limit_count: int | None = Field(default=None, ge=0)  # None: requeue for ever

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: str) -> str:
        if value not in ("Eviction", "Creation"):
            raise ValueError(f"must be Eviction or Creation, got {value!r}")
        return value


class WaitForPodsReady(KubeModel):
    """``waitForPodsReady``. v1beta2 has no ``enable``: the section present turns it on.
    v1beta1's ``enable`` defaults to false there, and ``blockAdmission`` to ``enable``
    (`pykueue.engine.configuration` applies both, as upstream's conversion does)."""

    enable: bool | None = None
    timeout: Duration = "30m"
    recovery_timeout: Duration | None = None  # None: the timeout; "0s" switches it off
    block_admission: bool | None = None
    requeuing_strategy: RequeuingStrategy = Field(default_factory=RequeuingStrategy)


class MultiKueue(KubeModel):
    """``multiKueue``: how a manager dispatches to its workers (`pykueue.multikueue.controller`)."""

    gc_interval: Duration | None = None
    origin: str | None = Field(default=None, min_length=1, max_length=63)
    worker_lost_timeout: Duration | None = None
    dispatcher_name: str | None = Field(default=None, min_length=1)


class WorkloadRetentionPolicy(KubeModel):
    """When Workloads Kueue is done with are deleted (`pykueue.reconcilers.retention`)."""

    after_finished: Duration | None = None
    after_deactivated_by_kueue: Duration | None = None


class ObjectRetentionPolicies(KubeModel):
    workloads: WorkloadRetentionPolicy | None = None


def _contract(raw: Any) -> PreemptionContract | None:
    if raw is None:
        return None
    found = governance.contract_setting(raw, "")
    if isinstance(found, FieldProblem):
        raise _nested(found.path, found.message)
    return found


def _cost(raw: Any) -> PreemptionCost | None:
    return None if raw is None else _site_policy(governance.cost_setting, raw)


def _reservation(raw: Any) -> Reservation | None:
    return None if raw is None else _site_policy(governance.reservation_setting, raw)


def _site_policy(read: Callable[[Any, str], _P], raw: Any) -> _P:
    """A site-wide policy read by ``read``, its ValueError ("path: message") turned into the
    configuration's error at that nested path."""
    try:
        return read(raw, "")
    except ValueError as exc:
        at, _, message = str(exc).partition(": ")
        raise _nested(at, message) from None


class PykueueOptions(KubeModel):
    """``pykueue``: pykueue's own engine options, each off (upstream's cycle) unless set.

    One field per option; `pykueue.engine.configuration` turns them into the engine's.
    """

    # EngineConfig.nominal_first; None: the caller's default (docs/semantics.md).
    nominal_first: bool | None = None
    # The preemption contract of ClusterQueues without their own (docs/governance.md).
    preemption_contract: Annotated[PreemptionContract | None, PlainValidator(_contract)] = None
    # The preemption-cost policy of ClusterQueues without their own (docs/governance.md).
    preemption_cost: Annotated[PreemptionCost | None, PlainValidator(_cost)] = None
    # The reservation policy of ClusterQueues without their own or their cohorts' (docs/governance.md).
    reservation: Annotated[Reservation | None, PlainValidator(_reservation)] = None
    # EngineConfig.requeue_order: where an evicted workload goes back in its queue.
    requeue_order: Literal["Eviction", "Creation"] | None = None


# Upstream's sections for its Go manager: accepted as written, not acted on (yet).
OTHER_SECTIONS: Final = frozenset(
    {
        "internalCertManagement",
        "clientConnection",
        "queueVisibility",
        "visibilityServer",
        "health",
        "metrics",
        "webhook",
        "leaderElection",
        "controller",
        "pprofBindAddress",
        "admissionChecks",
        "tls",
    }
)
# The sections the engine reads (with resources' quota side, `QUOTA_RESOURCES`).
ENGINE_SECTIONS: Final = frozenset(
    {"fairSharing", "admissionFairSharing", "featureGates", "waitForPodsReady", "pykueue"}
)
QUOTA_RESOURCES: Final = frozenset({"resources.excludeResourcePrefixes", "resources.transformations"})
# The sections the job framework, MultiKueue and retention read (the controller's).
JOB_SECTIONS: Final = frozenset(
    {
        "namespace",
        "manageJobsWithoutQueueName",
        "managedJobsNamespaceSelector",
        "integrations",
        "resources",
        "multiKueue",
        "objectRetentionPolicies",
    }
)


class Configuration(KubeModel):
    """The whole Configuration, typed; ``apiVersion`` and ``kind`` are absent when the
    sections come from another file (`parse_sections`)."""

    api_version: Literal["config.kueue.x-k8s.io/v1beta2", "config.kueue.x-k8s.io/v1beta1"] | None = None
    kind: Literal["Configuration"] | None = None
    namespace: str = DEFAULT_NAMESPACE
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: LabelSelector | None = None
    integrations: Integrations = Field(default_factory=Integrations)
    resources: Resources = Field(default_factory=Resources)
    fair_sharing: FairSharing = Field(default_factory=FairSharing)
    admission_fair_sharing: AdmissionFairSharing | None = None
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    wait_for_pods_ready: WaitForPodsReady | None = None
    multi_kueue: MultiKueue = Field(default_factory=MultiKueue)
    object_retention_policies: ObjectRetentionPolicies = Field(default_factory=ObjectRetentionPolicies)
    pykueue: PykueueOptions = Field(default_factory=PykueueOptions)
    internal_cert_management: Any = None
    client_connection: Any = None
    queue_visibility: Any = None
    visibility_server: Any = None
    health: Any = None
    metrics: Any = None
    webhook: Any = None
    leader_election: Any = None
    controller: Any = None
    pprof_bind_address: Any = None
    admission_checks: Any = None
    tls: Any = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        """A section written empty (``fairSharing:``) reads as absent, as upstream decodes it."""
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items() if value is not None}
        return data

    @field_validator("feature_gates")
    @classmethod
    def _known_gates(cls, gates: dict[str, bool]) -> dict[str, bool]:
        unknown = sorted(name for name in gates if name not in KNOWN_GATES)
        if unknown:
            raise ValueError(
                f"unknown gate(s): {', '.join(unknown)} (names are upstream Kueue's feature gates)"
            )
        refused = gate_support.problems(gates)  # a value pykueue does not implement, by name
        if refused:
            raise ValueError("; ".join(refused))
        return gates

    @model_validator(mode="after")
    def _v1beta2_has_no_enable(self) -> Configuration:
        wait = self.wait_for_pods_ready
        if self.api_version == V1BETA2 and wait is not None and wait.enable is not None:
            raise _nested(
                "waitForPodsReady.enable",
                "v1beta2 has no enable (the section present turns it on); enable is v1beta1's",
            )
        return self

    def namespace_selector(self) -> LabelSelector:
        """``managedJobsNamespaceSelector``, or upstream's default: every namespace but
        ``kube-system`` and the controller's own."""
        if self.managed_jobs_namespace_selector is not None:
            return self.managed_jobs_namespace_selector
        return LabelSelector(
            match_expressions=[
                LabelSelectorRequirement(
                    key="kubernetes.io/metadata.name",
                    operator="NotIn",
                    values=["kube-system", self.namespace],
                )
            ]
        )

    def sections(self) -> list[str]:
        """The top-level keys the file set (their wire names)."""
        fields = type(self).model_fields
        return sorted(fields[name].alias or name for name in self.model_fields_set)

    def ignored_sections(self) -> list[str]:
        """Top-level keys pykueue accepts but does not act on."""
        return [name for name in self.sections() if name in OTHER_SECTIONS]


def default() -> Configuration:
    """The configuration of a controller started without ``--config``."""
    return Configuration(api_version=V1BETA2, kind="Configuration")


def parse(doc: Any, source: str = "", accept: Iterable[str] | None = None) -> Configuration:
    """One Configuration document (``apiVersion`` and ``kind`` required); `ValidationError`
    with the file's field paths. ``accept``: as in `parse_sections`; None takes every section."""
    if not isinstance(doc, Mapping):
        raise ValidationError([FieldProblem("", "a Configuration must be a mapping", source=source)])
    missing = [key for key in ("apiVersion", "kind") if doc.get(key) is None]
    if missing:
        problems = [
            FieldProblem(
                key, f"required ({' or '.join(API_VERSIONS)}, kind Configuration)", "Configuration", source
            )
            for key in missing
        ]
        raise ValidationError(problems)
    allowed = None if accept is None else {*accept, "apiVersion", "kind"}
    return _validate(doc, source, "", "Configuration", allowed)


def parse_sections(
    doc: Any, source: str = "", prefix: str = "", accept: Iterable[str] | None = None
) -> Configuration:
    """Configuration sections held in another file (a scenario's ``config``, the standalone
    server's config): no ``apiVersion`` or ``kind``. ``prefix`` is where they sit in that
    file (``config``); ``accept`` the sections the caller reads, a top-level key or
    ``section.key`` for part of one; any other key is refused by name."""
    if not isinstance(doc, Mapping):
        raise ValidationError([FieldProblem(prefix, "must be a mapping", source=source)])
    allowed = set(accept) if accept is not None else None
    if allowed is not None:
        allowed -= {"apiVersion", "kind"}
    return _validate(doc, source, prefix, "", allowed)


def load(path: str | Path, accept: Iterable[str] | None = None) -> Configuration:
    """Read a Configuration file (YAML or JSON, one document)."""
    path = Path(path)
    text = manifests.read_text(path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParseError(f"{path}: not YAML: {exc}") from None
    return parse(doc, str(path), accept)


def _validate(
    doc: Mapping[Any, Any], source: str, prefix: str, obj: str, allowed: set[str] | None
) -> Configuration:
    def at(path: str) -> str:
        return f"{prefix}.{path}" if prefix and path else prefix or path

    if allowed is not None:
        refused = [
            FieldProblem(at(path), message, obj, source) for path, message in _not_accepted(doc, allowed)
        ]
        if refused:
            raise ValidationError(refused)
    try:
        return Configuration.model_validate(dict(doc))
    except pydantic.ValidationError as err:
        raise ValidationError(
            [FieldProblem(at(path), message, obj, source) for path, message in _problems(err)]
        ) from None


def _not_accepted(doc: Mapping[Any, Any], allowed: set[str]) -> list[tuple[str, str]]:
    """The keys of ``doc`` outside ``allowed`` (top-level keys, or ``section.key``)."""
    shown = ", ".join(sorted(allowed))
    out: list[tuple[str, str]] = []
    for key, value in doc.items():
        name = str(key)
        if name in allowed:
            continue
        parts = sorted(a.split(".", 1)[1] for a in allowed if a.startswith(f"{name}."))
        if parts and isinstance(value, Mapping):
            out.extend(
                (f"{name}.{sub}", f"not read here (of {name}, only {', '.join(parts)})")
                for sub in value
                if str(sub) not in parts
            )
            continue
        out.append((name, f"not read here (only {shown})"))
    return out


def _problems(err: pydantic.ValidationError) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for e in err.errors():
        ctx = e.get("ctx") or {}
        path = manifests.format_loc(e["loc"])
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "nested_field":
            path = _join(path, str(ctx.get("at", "")))
        elif e["type"] == "extra_forbidden":
            message = "unknown field"
        found.append((path, message))
    return found


def _join(path: str, below: str) -> str:
    """``path`` and a path below it (``.x``, ``[1].input`` or ``section.key``)."""
    if not path or not below:
        return (path or below).lstrip(".")
    return path + below if below[0] in ".[" else f"{path}.{below}"
