"""Fields of Kueue v0.19.2's API that pykueue refuses rather than store and never act on.

Most belong to an upstream feature that pykueue does not implement (docs/semantics.md,
"API fields and feature gates of v0.19.2"). Upstream, with the feature's gate at its default,
stores these fields and does nothing with them; pykueue refuses them instead, naming the
field and the feature, so that nobody believes a policy is in force that is not. One (the
device claims of a Workload no job built) upstream acts on and pykueue does not yet:
refused too, rather than admitted with less quota charged.

`problems(obj)` is part of `validation.validate`, so the Kubernetes webhook, standalone's
apply, ``pykueue validate`` and the scenario loader all refuse the same things.
`elastic_job_problems(metadata)` is the same rule for a job of any kind (the job webhook).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pykueue.api.checks import Problems
from pykueue.api.cluster_queue import ClusterQueue
from pykueue.api.multikueue import MultiKueueConfig
from pykueue.api.workload import Workload
from pykueue.errors import FieldProblem

# Upstream's opt-in of a job into elastic scaling (ElasticJobsViaWorkloadSlices), and the
# annotation a Workload slice carries naming the slice it replaces.
ELASTIC_JOB_ANNOTATION: Final = "kueue.x-k8s.io/elastic-job"
SLICE_REPLACEMENT_ANNOTATION: Final = "kueue.x-k8s.io/workload-slice-replacement-for"
# The label of a MultiKueue worker's copy of a Workload: its devices were charged by the
# manager's job framework before it was copied (the same string as jobframework's).
MULTIKUEUE_ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"

CONCURRENT_ADMISSION = (
    "not supported by pykueue: it is upstream's ConcurrentAdmission feature (alpha feature gate, off by "
    "default), which pykueue does not implement; remove the field"
)
PREEMPTION_GATES = (
    "not supported by pykueue: preemption gates are read only by upstream's ConcurrentAdmission and "
    "MultiKueueOrchestratedPreemption features (alpha feature gates, off by default), which pykueue does "
    "not implement; remove the field"
)
QUOTA_AUTOMATION = (
    "unsupported value 'Automated': pykueue does not implement upstream's MultiKueueManagerQuotaAutomation "
    "(alpha feature gate, off by default); only 'Manual' (the default) is supported"
)
DEVICE_CLAIMS_OF_A_BARE_WORKLOAD = (
    "not supported by pykueue: the devices of a Workload created directly (with no owner) are not "
    "charged as quota; pykueue charges a ResourceClaimTemplate's devices only when it builds the "
    "Workload of a job (docs/kubernetes.md, DRA devices); submit the job instead, or remove the claims"
)
ELASTIC_JOBS = (
    "not supported by pykueue: elastic jobs are upstream's ElasticJobsViaWorkloadSlices feature (Workload "
    "slices), which pykueue does not implement; remove the annotation"
)


def elastic_job_problems(annotations: Mapping[str, Any] | None) -> list[FieldProblem]:
    """The refusal of an object that opts into elastic scaling or is a Workload slice."""
    out: list[FieldProblem] = []
    annotations = annotations or {}
    if str(annotations.get(ELASTIC_JOB_ANNOTATION, "")).lower() == "true":
        out.append(FieldProblem(f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]", ELASTIC_JOBS))
    if SLICE_REPLACEMENT_ANNOTATION in annotations:
        out.append(FieldProblem(f"metadata.annotations[{SLICE_REPLACEMENT_ANNOTATION}]", ELASTIC_JOBS))
    return out


def problems(obj: object, annotations: Mapping[str, Any] | None) -> list[FieldProblem]:
    """Every field of ``obj`` that names a feature pykueue does not implement."""
    out = Problems()
    out.items.extend(elastic_job_problems(annotations))
    if isinstance(obj, ClusterQueue) and obj.spec.concurrent_admission_policy is not None:
        out.add("spec.concurrentAdmissionPolicy", CONCURRENT_ADMISSION)
    elif isinstance(obj, Workload):
        if obj.spec.preemption_gates:
            out.add("spec.preemptionGates", PREEMPTION_GATES)
        if obj.status.preemption_gates:
            out.add("status.preemptionGates", PREEMPTION_GATES)
        _bare_workload_claims(obj, out)
    elif isinstance(obj, MultiKueueConfig) and obj.spec.quota_management == "Automated":
        out.add("spec.quotaManagement", QUOTA_AUTOMATION)
    return out.items


def _bare_workload_claims(wl: Workload, out: Problems) -> None:
    """Refuse device claims in the pod sets of a Workload that no job built.

    Upstream's workload controller charges any Workload's ResourceClaimTemplates; pykueue
    charges them where a job's Workload is built (reconcilers/dra.py), as pod overhead. A
    Workload applied by hand (or pre-built for a job) has no owner then, and its claims
    would be queued uncharged, so they are refused. A MultiKueue worker's copy carries the
    charge its manager made.
    """
    meta = wl.metadata
    if meta.owner_references or MULTIKUEUE_ORIGIN_LABEL in (meta.labels or {}):
        return
    for index, pod_set in enumerate(wl.spec.pod_sets):
        extra = pod_set.template.spec.model_extra or {}
        if extra.get("resourceClaims") or extra.get("resource_claims"):
            out.add(f"spec.podSets[{index}].template.spec.resourceClaims", DEVICE_CLAIMS_OF_A_BARE_WORKLOAD)
