"""KubeRay's RayCluster and RayJob (``ray.io/v1``).

    RayCluster ── head (count 1) + one pod set per worker group
                  (named after groupName, count = replicas x numOfHosts, replicas default 1)
       └ spec.suspend ──▶ KubeRay deletes the cluster's pods / makes them again
    RayJob ────── its rayClusterSpec's pod sets + "submitter" (the Job that runs
                  ``ray job submit``, in the default K8sJobMode)
       └ spec.suspend ──▶ KubeRay deletes the RayCluster it made / makes a new one

A RayCluster never finishes (it serves until deleted); a RayJob finishes when
KubeRay says its deployment is Complete or Failed. A RayJob that runs on an existing
cluster (``clusterSelector``) takes no quota of its own and is not queued, as
upstream. With in-tree autoscaling KubeRay adds an autoscaler container to the head
pod, so the head pod set is charged for it too. No partial admission.

MultiKueue dispatches both (KubeRay 1.3+ has ``spec.managedBy``), as upstream: the copy
is the whole spec, suspended; the status mirrored is the whole status. A RayJob's
RayCluster is made by the worker's KubeRay from the copy and never seen by the manager.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.reconcilers.jobframework import (
    Finished,
    Integration,
    PodSetInfo,
    SpecMultiKueue,
    merge_into_template,
    queue_name_of,
    restore_template,
)
from pykueue.store.base import Manifest

HEAD = "head"
SUBMITTER = "submitter"
SUBMITTER_CONTAINER = "ray-job-submitter"
AUTOSCALER_CONTAINER = "autoscaler"
# What KubeRay gives its submitter and autoscaler containers when the spec says nothing.
SUBMITTER_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "200Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}
AUTOSCALER_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}


def _worker_count(group: Manifest) -> int:
    replicas = group.get("replicas")
    count = 1 if replicas is None else int(replicas)
    hosts = int(group.get("numOfHosts") or 1)
    return count * hosts if hosts > 1 else count


def cluster_pod_sets(spec: Manifest) -> list[Manifest]:
    """The pod sets of a RayClusterSpec: the head, then each worker group."""
    head_template = copy.deepcopy((spec.get("headGroupSpec") or {}).get("template") or {})
    if spec.get("enableInTreeAutoscaling"):
        options = spec.get("autoscalerOptions") or {}
        resources = options.get("resources") or AUTOSCALER_RESOURCES
        containers = head_template.setdefault("spec", {}).setdefault("containers", [])
        containers.append({"name": AUTOSCALER_CONTAINER, "resources": copy.deepcopy(resources)})
    pod_sets: list[Manifest] = [{"name": HEAD, "count": 1, "template": head_template}]
    for group in spec.get("workerGroupSpecs") or []:
        pod_sets.append(
            {
                "name": str(group["groupName"]).lower(),
                "count": _worker_count(group),
                "template": copy.deepcopy(group.get("template") or {}),
            }
        )
    return pod_sets


def _cluster_templates(spec: Manifest) -> dict[str, dict[str, Any]]:
    templates = {HEAD: spec.setdefault("headGroupSpec", {}).setdefault("template", {})}
    for group in spec.get("workerGroupSpecs") or []:
        templates[str(group["groupName"]).lower()] = group.setdefault("template", {})
    return templates


def _merge(templates: dict[str, dict[str, Any]], infos: list[PodSetInfo]) -> None:
    for info in infos:
        if info.name in templates:
            merge_into_template(templates[info.name], info)


def _restore(templates: dict[str, dict[str, Any]], infos: list[PodSetInfo]) -> bool:
    changed = False
    for info in infos:
        if info.name in templates:
            changed = restore_template(templates[info.name], info) or changed
    return changed


class RayClusterAdapter:
    """ray.io RayCluster through `pykueue.reconcilers.jobframework.JobAdapter`."""

    kind = "RayCluster"
    api_version = "ray.io/v1"

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        return cluster_pod_sets(job.get("spec") or {})

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        spec = job.setdefault("spec", {})
        spec["suspend"] = False
        _merge(_cluster_templates(spec), infos)

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        return _restore(_cluster_templates(job.setdefault("spec", {})), infos)

    def finished(self, job: Manifest) -> Finished | None:
        return None  # a RayCluster serves until it is deleted

    def is_active(self, job: Manifest) -> bool:
        return bool((job.get("status") or {}).get("state") == "ready")

    def pods_ready(self, job: Manifest) -> bool:
        return bool((job.get("status") or {}).get("state") == "ready")

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        return []


def _k8s_job_mode(job: Manifest) -> bool:
    return bool((job.get("spec") or {}).get("submissionMode", "K8sJobMode") == "K8sJobMode")


def _default_submitter(job: Manifest) -> dict[str, Any]:
    head = ((job.get("spec") or {}).get("rayClusterSpec") or {}).get("headGroupSpec") or {}
    containers = ((head.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return {
        "spec": {
            "containers": [
                {
                    "name": SUBMITTER_CONTAINER,
                    "image": containers[0].get("image", ""),
                    "resources": copy.deepcopy(SUBMITTER_RESOURCES),
                }
            ],
            "restartPolicy": "Never",
        }
    }


class RayJobAdapter:
    """ray.io RayJob through `pykueue.reconcilers.jobframework.JobAdapter`."""

    kind = "RayJob"
    api_version = "ray.io/v1"

    def queue_name(self, job: Manifest) -> str:
        if (job.get("spec") or {}).get("clusterSelector"):
            return ""  # runs on a cluster that is queued (or not) on its own
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        pod_sets = cluster_pod_sets((job.get("spec") or {}).get("rayClusterSpec") or {})
        if _k8s_job_mode(job):
            template = (job.get("spec") or {}).get("submitterPodTemplate") or _default_submitter(job)
            pod_sets.append({"name": SUBMITTER, "count": 1, "template": copy.deepcopy(template)})
        return pod_sets

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def _templates(self, job: Manifest, create_submitter: bool) -> dict[str, dict[str, Any]]:
        spec = job.setdefault("spec", {})
        templates = _cluster_templates(spec.setdefault("rayClusterSpec", {}))
        if _k8s_job_mode(job) and (create_submitter or spec.get("submitterPodTemplate")):
            if not spec.get("submitterPodTemplate"):
                spec["submitterPodTemplate"] = _default_submitter(job)
            templates[SUBMITTER] = spec["submitterPodTemplate"]
        return templates

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        job.setdefault("spec", {})["suspend"] = False
        _merge(self._templates(job, create_submitter=True), infos)

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        return _restore(self._templates(job, create_submitter=False), infos)

    def finished(self, job: Manifest) -> Finished | None:
        status = job.get("status") or {}
        if status.get("jobDeploymentStatus") not in ("Complete", "Failed"):
            return None
        succeeded = status.get("jobStatus") == "SUCCEEDED"
        return Finished(succeeded, str(status.get("message") or f"RayJob {status.get('jobStatus', 'ended')}"))

    def is_active(self, job: Manifest) -> bool:
        return (job.get("status") or {}).get("jobDeploymentStatus") not in (None, "", "New", "Suspended")

    def pods_ready(self, job: Manifest) -> bool:
        return ((job.get("status") or {}).get("rayClusterStatus") or {}).get("state") == "ready"

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        return []


# KubeRay's own name in spec.managedBy.
KUBERAY_OPERATOR = "ray.io/kuberay-operator"


def multikueue_adapter() -> SpecMultiKueue:
    """A RayJob or RayCluster through `pykueue.reconcilers.jobframework.MultiKueueAdapter`."""
    return SpecMultiKueue(("spec", "managedBy"), ("spec", "suspend"), KUBERAY_OPERATOR)


RAYCLUSTER = Integration(
    name="ray.io/raycluster",
    kind="RayCluster",
    group="ray.io",
    version="v1",
    plural="rayclusters",
    adapter=RayClusterAdapter,
    multikueue=multikueue_adapter,
    prebuilt_workload=True,
)
RAYJOB = Integration(
    name="ray.io/rayjob",
    kind="RayJob",
    group="ray.io",
    version="v1",
    plural="rayjobs",
    adapter=RayJobAdapter,
    multikueue=multikueue_adapter,
    prebuilt_workload=True,
)
