"""Fields of v0.19.2's API: every one is in the audit table of docs/semantics.md, none is
"ignored", and those of features pykueue lacks are refused with a message naming them."""

from __future__ import annotations

import asyncio
import re
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from audit_table import code, rows
from pykueue.api import manifests
from pykueue.api.admission_check import AdmissionCheck, ProvisioningRequestConfig
from pykueue.api.cluster_queue import ClusterQueue
from pykueue.api.cohort import Cohort
from pykueue.api.core import PodTemplateSpec
from pykueue.api.local_queue import LocalQueue
from pykueue.api.multikueue import MultiKueueCluster, MultiKueueConfig
from pykueue.api.priority import WorkloadPriorityClass
from pykueue.api.resource_flavor import ResourceFlavor
from pykueue.api.topology import Topology
from pykueue.api.workload import Workload
from pykueue.errors import ValidationError
from pykueue.kube import webhooks

from . import samples
from .samples import with_

KUEUE_KINDS: tuple[type[BaseModel], ...] = (
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
    AdmissionCheck,
    Topology,
    MultiKueueCluster,
    MultiKueueConfig,
    ProvisioningRequestConfig,
)
STATES = {"implemented", "refused", "written by pykueue", "not applicable"}


def _aliases(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _fields(kind: type[BaseModel]) -> list[str]:
    """The fields the audit covers: the top level of ``spec`` and ``status`` (or of the
    object itself for a kind without a spec)."""
    fields = kind.model_fields
    if "spec" not in fields:
        return [f for f in _aliases(kind) if f not in ("apiVersion", "kind", "metadata")]
    out = []
    for part in ("spec", "status"):
        model = _model_of(fields[part].annotation) if part in fields else None
        if model is not None:
            out.extend(f"{part}.{alias}" for alias in _aliases(model))
    return out


def _covered() -> dict[str, set[str]]:
    """Per object, the fields the table has a row for (``status.*`` rows list theirs)."""
    out: dict[str, set[str]] = {}
    for row in rows("Fields"):
        assert len(row) == 4, row
        objects, field, state = row[0], code(row[1]), row[2]
        assert state in STATES, f"{objects} {field}: state {state!r} is none of {sorted(STATES)}"
        assert row[3], f"{objects} {field}: no place or reason given"
        names = [field]
        listed = re.fullmatch(r"status\.\* \((.*)\)", field)
        if listed:
            names = [f"status.{name.strip()}" for name in listed.group(1).split(",")]
        for kind in objects.split(", "):
            out.setdefault(kind, set()).update(names)
    return out


@pytest.mark.parametrize("kind", KUEUE_KINDS, ids=lambda k: k.__name__)
def test_every_field_has_a_row(kind: type[BaseModel]) -> None:
    covered = _covered().get(kind.__name__, set())
    missing = [f for f in _fields(kind) if f not in covered]
    assert missing == [], f"{kind.__name__} fields missing from docs/semantics.md's audit table"


def test_no_row_is_ignored() -> None:
    for row in rows("Fields"):
        assert "ignored" not in " ".join(row).lower(), row


def _is_list(annotation: Any) -> bool:
    return any(typing.get_origin(a) is list for a in (annotation, *typing.get_args(annotation)))


def _nested(model: type[BaseModel], prefix: str) -> list[str]:
    """Every leaf field below ``prefix``: list segments end in ``[]``; a pod template is a leaf."""
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}.{info.alias or name}"
        sub = _model_of(info.annotation)
        if sub is None or sub is PodTemplateSpec:
            out.append(path)
        else:
            out.extend(_nested(sub, path + ("[]" if _is_list(info.annotation) else "")))
    return out


def _expand(path: str) -> list[str]:
    """``a.{b, c.d}`` -> ``a.b``, ``a.c.d`` (one group per cell)."""
    group = re.fullmatch(r"(.*)\{(.*)\}", path)
    if group is None:
        return [path]
    return [group.group(1) + part.strip() for part in group.group(2).split(",")]


def _nested_rows() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for row in rows("Nested fields"):
        assert len(row) == 4, row
        assert row[2] in STATES, f"{row[0]} {row[1]}: state {row[2]!r} is none of {sorted(STATES)}"
        assert row[3], f"{row[0]} {row[1]}: no place or reason given"
        assert "ignored" not in " ".join(row).lower(), row
        for kind in row[0].split(", "):
            out.setdefault(kind, set()).update(_expand(code(row[1])))
    return out


@pytest.mark.parametrize(
    "kind", [k for k in KUEUE_KINDS if "spec" in k.model_fields], ids=lambda k: k.__name__
)
def test_every_nested_spec_field_has_a_row(kind: type[BaseModel]) -> None:
    spec = _model_of(kind.model_fields["spec"].annotation)
    assert spec is not None
    top = {f"spec.{alias}" for alias in _aliases(spec)}
    nested = [path for path in _nested(spec, "spec") if path not in top]
    missing = [path for path in nested if path not in _nested_rows().get(kind.__name__, set())]
    assert missing == [], f"{kind.__name__} nested fields missing from docs/semantics.md's Nested fields"


def _refusal(doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as err:
        manifests.parse_object(doc)
    return [(p.path, p.message) for p in err.value.problems]


def test_concurrent_admission_policy_is_refused_by_name() -> None:
    doc = with_(
        samples.cluster_queue(),
        "spec.concurrentAdmissionPolicy",
        {"migration": {"mode": "TryPreferredFlavors"}},
    )
    [(path, message)] = _refusal(doc)
    assert path == "spec.concurrentAdmissionPolicy"
    assert message.startswith("not supported by pykueue: it is upstream's ConcurrentAdmission feature")
    manifests.parse_object(samples.cluster_queue())  # without it: fine


@pytest.mark.parametrize("part", ["spec", "status"])
def test_preemption_gates_are_refused_by_name(part: str) -> None:
    gates: list[dict[str, Any]] = [{"name": "example.com/gate"}]
    if part == "status":
        gates = [
            {"name": "example.com/gate", "position": "Closed", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]
    [(path, message)] = _refusal(with_(samples.workload(), f"{part}.preemptionGates", gates))
    assert path == f"{part}.preemptionGates"
    assert "ConcurrentAdmission and MultiKueueOrchestratedPreemption" in message


def test_automated_multikueue_quota_is_refused_manual_is_not() -> None:
    [(path, message)] = _refusal(with_(samples.multikueue_config(), "spec.quotaManagement", "Automated"))
    assert path == "spec.quotaManagement"
    assert "MultiKueueManagerQuotaAutomation" in message
    manifests.parse_object(with_(samples.multikueue_config(), "spec.quotaManagement", "Manual"))


@pytest.mark.parametrize(
    ("make", "key", "value"),
    [
        (samples.job, "kueue.x-k8s.io/elastic-job", "true"),
        (samples.workload, "kueue.x-k8s.io/elastic-job", "true"),
        (samples.workload, "kueue.x-k8s.io/workload-slice-replacement-for", "team-a/w-old"),
    ],
)
def test_elastic_jobs_are_refused_by_annotation(make: Any, key: str, value: str) -> None:
    doc = make()
    doc["metadata"].setdefault("annotations", {})[key] = value
    [(path, message)] = _refusal(doc)
    assert path == f"metadata.annotations[{key}]"
    assert "ElasticJobsViaWorkloadSlices" in message


def test_a_job_that_is_not_elastic_may_say_so() -> None:
    doc = samples.job()
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "false"}
    manifests.parse_object(doc)


def test_the_job_webhook_refuses_an_elastic_job_of_any_kind() -> None:
    job = samples.job()
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    review = {"uid": "u", "operation": "CREATE", "namespace": "team-a", "object": job}
    response = asyncio.run(webhooks.validate_job(review, webhooks.WebhookConfig(), None))
    assert response["allowed"] is False
    assert "metadata.annotations[kueue.x-k8s.io/elastic-job]" in response["status"]["message"]


def _configuration(strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"quotaCheckStrategy": strategy},
    }


def test_quota_check_strategy_ignore_undeclared_is_refused_by_name() -> None:
    # Both readers of a controller's --config (the API model, the engine's reader).
    from pykueue.api import configuration
    from pykueue.errors import InputError
    from pykueue.reconcilers import kueue_configuration

    with pytest.raises(ValidationError) as err:
        configuration.parse(_configuration("IgnoreUndeclared"), "config.yaml")
    [problem] = err.value.problems
    assert problem.path == "resources.quotaCheckStrategy"
    assert "unsupported value 'IgnoreUndeclared'" in problem.message
    with pytest.raises(
        InputError, match=r"resources\.quotaCheckStrategy: unsupported value 'IgnoreUndeclared'"
    ):
        kueue_configuration.parse(_configuration("IgnoreUndeclared"), "config.yaml")
    configuration.parse(_configuration("BlockUndeclared"), "config.yaml")
    kueue_configuration.parse(_configuration("BlockUndeclared"), "config.yaml")


def _with_claims(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["podSets"][0]["template"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
    ]
    return doc


def test_device_claims_of_a_workload_no_job_built_are_refused_by_name() -> None:
    # Upstream charges them; pykueue charges devices only when a job's Workload is built.
    [(path, message)] = _refusal(_with_claims(samples.workload()))
    assert path == "spec.podSets[0].template.spec.resourceClaims"
    assert message.startswith("not supported by pykueue: the devices of a Workload created directly")


def test_device_claims_of_a_job_built_or_worker_workload_are_accepted() -> None:
    owned = _with_claims(samples.workload())
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "job-a", "uid": "0002", "controller": True}
    ]
    manifests.parse_object(owned)
    copy = _with_claims(samples.workload())
    copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] = "manager"
    manifests.parse_object(copy)


def test_a_sidecar_init_container_is_accepted_and_its_requests_counted() -> None:
    # Counted as upstream does (tests/engine/test_pod_requests.py), so nothing to refuse.
    doc = samples.workload()
    doc["spec"]["podSets"][0]["template"]["spec"]["initContainers"] = [
        {"name": "log", "image": "busybox", "restartPolicy": "Always"},
    ]
    parsed = manifests.parse_object(doc)
    assert parsed.spec.pod_sets[0].template.spec.init_containers[0].restart_policy == "Always"
