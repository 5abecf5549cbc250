"""AppWrapper (``workload.codeflare.dev/v1beta2``): any set of resources queued and run as one.

    AppWrapper ── components[i].podSets[j] {path, replicas} ──▶ pod set "<name>-<k>" (k counts
                  pod sets across components), template = the component's resource at ``path``
       └ spec.suspend ──▶ the AppWrapper controller creates or deletes the wrapped resources

A component's pod sets are written by the user or by the AppWrapper controller's
defaulting webhook for the kinds it knows. A component without them is read the way
that webhook would read it, in the same order: a Pod, a Deployment/StatefulSet/ReplicaSet
(``replicas`` of its template), and the job kinds pykueue integrates itself (Job, JobSet,
the Kubeflow jobs, RayCluster, RayJob), through their own adapters. Admission
does not edit the wrapped templates: it writes each pod set's node selector,
tolerations, labels and annotations into the component's ``podSetInfos``, which the
AppWrapper controller applies to the resources it creates; stopping removes them.
The wrapped resources are the AppWrapper's children and are never queued on their own.

MultiKueue dispatches an AppWrapper (``spec.managedBy``) as upstream: the copy is the
spec without the manager's ``podSetInfos`` (the worker's Kueue writes its own), the
status mirrored is the whole status.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.reconcilers.integrations import batch_job, jobset, kubeflow, ray
from pykueue.reconcilers.jobframework import (
    Finished,
    Integration,
    JobAdapter,
    PodSetInfo,
    SpecMultiKueue,
    queue_name_of,
)
from pykueue.store.base import Manifest

_WORKLOAD_KINDS = {("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "ReplicaSet")}


def _wrapped_adapters() -> list[JobAdapter]:
    kinds = (kubeflow.PYTORCHJOB, kubeflow.TFJOB, kubeflow.PADDLEJOB, kubeflow.XGBOOSTJOB, kubeflow.JAXJOB)
    adapters: list[JobAdapter] = [batch_job.BatchJobAdapter(), jobset.JobSetAdapter()]
    adapters += [ray.RayClusterAdapter(), ray.RayJobAdapter(), kubeflow.MPIJOB.adapter()]  # type: ignore[misc]
    adapters += [k.adapter() for k in kinds]  # type: ignore[misc]
    return adapters


def inferred_pod_sets(component: Manifest) -> list[tuple[int, Manifest]]:
    """(count, template) of each pod set of a component that lists none, as AppWrapper would infer them."""
    wrapped = component.get("template") or {}
    key = (str(wrapped.get("apiVersion")), str(wrapped.get("kind")))
    if key == ("v1", "Pod"):
        return [(1, {k: copy.deepcopy(wrapped[k]) for k in ("metadata", "spec") if k in wrapped})]
    if key in _WORKLOAD_KINDS:
        spec = wrapped.get("spec") or {}
        replicas = spec.get("replicas")
        return [(1 if replicas is None else int(replicas), copy.deepcopy(spec.get("template") or {}))]
    for adapter in _wrapped_adapters():
        if (adapter.api_version, adapter.kind) == key:
            return [(int(ps["count"]), ps["template"]) for ps in adapter.pod_sets(wrapped)]
    return []


def _components(job: Manifest) -> list[dict[str, Any]]:
    components: list[dict[str, Any]] = (job.get("spec") or {}).get("components") or []
    return components


def _at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not part:
            continue
        if not isinstance(obj, dict) or part not in obj:
            raise KeyError(f"path {path!r}: no {part!r}")
        obj = obj[part]
    return obj


def _flat(job: Manifest) -> list[tuple[dict[str, Any], int]]:
    """(component, index of the pod set in it) for every pod set, declared or inferred, in order."""
    out: list[tuple[dict[str, Any], int]] = []
    for component in _components(job):
        count = len(component.get("podSets") or []) or len(inferred_pod_sets(component))
        out.extend((component, j) for j in range(count))
    return out


def _pod_set_name(job: Manifest, index: int) -> str:
    return f"{(job.get('metadata') or {}).get('name', '')}-{index}".lower()


class AppWrapperAdapter:
    """workload.codeflare.dev AppWrapper through `pykueue.reconcilers.jobframework.JobAdapter`."""

    kind = "AppWrapper"
    api_version = "workload.codeflare.dev/v1beta2"

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        found: list[tuple[int, Manifest]] = []
        for component in _components(job):
            declared = component.get("podSets")
            if not declared:
                found.extend(inferred_pod_sets(component))
                continue
            for pod_set in declared:
                replicas = pod_set.get("replicas")
                template = copy.deepcopy(_at(component, str(pod_set.get("path", ""))))
                found.append((1 if replicas is None else int(replicas), template))
        return [
            {"name": _pod_set_name(job, k), "count": count, "template": template}
            for k, (count, template) in enumerate(found)
        ]

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        by_name = {info.name: info for info in infos}
        for component in _components(job):
            component.pop("podSetInfos", None)
        for k, (component, j) in enumerate(_flat(job)):
            info = by_name.get(_pod_set_name(job, k))
            entries = component.setdefault("podSetInfos", [])
            while len(entries) <= j:
                entries.append({})
            if info is not None:
                entry: dict[str, Any] = {}
                if info.node_selector:
                    entry["nodeSelector"] = dict(info.node_selector)
                if info.tolerations:
                    entry["tolerations"] = [dict(t) for t in info.tolerations]
                if info.labels:
                    entry["labels"] = dict(info.labels)
                if info.annotations:
                    entry["annotations"] = dict(info.annotations)
                entries[j] = entry
        job.setdefault("spec", {})["suspend"] = False

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        changed = False
        for component in _components(job):
            if component.pop("podSetInfos", None) is not None:
                changed = True
        return changed

    def _condition(self, job: Manifest, kind: str) -> bool:
        return any(
            c.get("type") == kind and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )

    def finished(self, job: Manifest) -> Finished | None:
        phase = (job.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return Finished(True, "AppWrapper finished successfully")
        if phase == "Failed" and not self._condition(job, "ResourcesDeployed"):
            return Finished(False, "AppWrapper failed")
        return None

    def is_active(self, job: Manifest) -> bool:
        return self._condition(job, "ResourcesDeployed")

    def pods_ready(self, job: Manifest) -> bool:
        return self._condition(job, "PodsReady")

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        return []


# The AppWrapper controller's own name in spec.managedBy.
APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"


def _strip_pod_set_infos(remote: Manifest) -> None:
    for component in _components(remote):
        component.pop("podSetInfos", None)


def multikueue_adapter() -> SpecMultiKueue:
    """An AppWrapper through `pykueue.reconcilers.jobframework.MultiKueueAdapter`."""
    return SpecMultiKueue(
        ("spec", "managedBy"), ("spec", "suspend"), APPWRAPPER_CONTROLLER, _strip_pod_set_infos
    )


INTEGRATION = Integration(
    name="workload.codeflare.dev/appwrapper",
    kind="AppWrapper",
    group="workload.codeflare.dev",
    version="v1beta2",
    plural="appwrappers",
    adapter=AppWrapperAdapter,
    multikueue=multikueue_adapter,
    prebuilt_workload=True,
)
