"""Kueue's Configuration (``config.kueue.x-k8s.io`` v1beta1 or v1beta2), the file ``--config`` reads.

Modelled field by field where pykueue acts on it: which jobs are managed
(``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector``), which kinds
(``integrations.frameworks``, ``labelKeysToCopy``), how pod requests become quota
(``resources.deviceClassMappings``; ``excludeResourcePrefixes`` and
``transformations`` are read as given), fair sharing, feature gates, and when
Workloads and deactivated jobs are deleted (``objectRetentionPolicies``). Sections of
upstream's file that concern its Go manager (``webhook``, ``metrics``,
``leaderElection``, ``clientConnection``, ``internalCertManagement``...) are accepted
as written, so an upstream configuration file loads unchanged; `ignored_sections`
names them, and pykueue's own flags cover what they set.

A problem is a `ValidationError` whose paths are the file's (``integrations.frameworks[2]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

import pydantic
import yaml
from pydantic import Field

from pykueue.api import manifests
from pykueue.api.meta import KubeModel, LabelSelector, LabelSelectorRequirement, PassthroughModel
from pykueue.errors import FieldProblem, ParseError, ValidationError

GROUP: Final = "config.kueue.x-k8s.io"
API_VERSIONS: Final = (f"{GROUP}/v1beta2", f"{GROUP}/v1beta1")
DEFAULT_NAMESPACE: Final = "kueue-system"


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
    transformations: list[dict[str, Any]] = Field(default_factory=list)
    device_class_mappings: list[DeviceClassMapping] = Field(default_factory=list, max_length=16)


class FairSharing(KubeModel):
    enable: bool = False
    preemption_strategies: list[Literal["LessThanOrEqualToFinalShare", "LessThanInitialShare"]] = Field(
        default_factory=list
    )


# A Go duration as the Configuration writes them: 15m, 1h30m, 90s.
GO_DURATION: Final = r"^([0-9]+(\.[0-9]+)?(h|m|s))+$"


class MultiKueue(KubeModel):
    """``multiKueue``: how a manager dispatches to its workers (`pykueue.multikueue.controller`)."""

    gc_interval: str | None = Field(default=None, pattern=GO_DURATION)
    origin: str | None = Field(default=None, min_length=1, max_length=63)
    worker_lost_timeout: str | None = Field(default=None, pattern=GO_DURATION)
    dispatcher_name: str | None = Field(default=None, min_length=1)


class WorkloadRetentionPolicy(KubeModel):
    """When Workloads Kueue is done with are deleted (`pykueue.reconcilers.retention`)."""

    after_finished: str | None = Field(default=None, pattern=GO_DURATION)
    after_deactivated_by_kueue: str | None = Field(default=None, pattern=GO_DURATION)


class ObjectRetentionPolicies(KubeModel):
    workloads: WorkloadRetentionPolicy | None = None


class Configuration(PassthroughModel):
    """The parts of upstream's Configuration pykueue reads; the rest is kept as given."""

    api_version: Literal["config.kueue.x-k8s.io/v1beta2", "config.kueue.x-k8s.io/v1beta1"]
    kind: Literal["Configuration"]
    namespace: str = DEFAULT_NAMESPACE
    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: LabelSelector | None = None
    integrations: Integrations = Field(default_factory=Integrations)
    resources: Resources = Field(default_factory=Resources)
    fair_sharing: FairSharing | None = None
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    multi_kueue: MultiKueue = Field(default_factory=MultiKueue)
    object_retention_policies: ObjectRetentionPolicies = Field(default_factory=ObjectRetentionPolicies)

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

    def ignored_sections(self) -> list[str]:
        """Top-level keys pykueue accepts but does not act on."""
        return sorted(self.model_extra or {})


def default() -> Configuration:
    """The configuration of a controller started without ``--config``."""
    return Configuration(api_version="config.kueue.x-k8s.io/v1beta2", kind="Configuration")


def parse(doc: Any, source: str = "") -> Configuration:
    """One Configuration document; `ValidationError` with the file's field paths."""
    if not isinstance(doc, dict):
        raise ValidationError([FieldProblem("", "a Configuration must be a mapping", source=source)])
    try:
        return Configuration.model_validate(doc)
    except pydantic.ValidationError as err:
        problems = [
            FieldProblem(manifests.format_loc(e["loc"]), e["msg"], "Configuration", source)
            for e in err.errors()
        ]
        raise ValidationError(problems) from None


def load(path: str | Path) -> Configuration:
    """Read a Configuration file (YAML or JSON, one document)."""
    path = Path(path)
    text = manifests.read_text(path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ParseError(f"{path}: not YAML: {exc}") from None
    return parse(doc, str(path))
