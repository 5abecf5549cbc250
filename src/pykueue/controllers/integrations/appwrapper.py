"""AppWrapper (``workload.codeflare.dev/v1beta2``): any set of resources queued and run as one.

    AppWrapper ── components[i].podSets[j] {path, replicas} ──▶ pod set "<name>-<k>" (k counts
                  pod sets across components), template = the component's resource at ``path``
       └ spec.suspend ──▶ the AppWrapper controller creates or deletes the wrapped resources

A component's pod sets are written by the AppWrapper controller's defaulting webhook
for the kinds it knows (Deployment, Job, PyTorchJob ...), or by the user. Admission
does not edit the wrapped templates: it writes each pod set's node selector,
tolerations, labels and annotations into the component's ``podSetInfos``, which the
AppWrapper controller applies to the resources it creates; stopping removes them.
The wrapped resources are the AppWrapper's children and are never queued on their own.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.controllers.jobframework import Finished, Integration, PodSetInfo, queue_name_of
from pykueue.store.base import Manifest


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


def _flat(job: Manifest) -> list[tuple[dict[str, Any], int, Manifest]]:
    """(component, index of the pod set in it, pod set) for every pod set, in order."""
    return [
        (component, j, pod_set)
        for component in _components(job)
        for j, pod_set in enumerate(component.get("podSets") or [])
    ]


def _pod_set_name(job: Manifest, index: int) -> str:
    return f"{(job.get('metadata') or {}).get('name', '')}-{index}".lower()


class AppWrapperAdapter:
    """workload.codeflare.dev AppWrapper through `pykueue.controllers.jobframework.JobAdapter`."""

    kind = "AppWrapper"
    api_version = "workload.codeflare.dev/v1beta2"

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        out = []
        for k, (component, _, pod_set) in enumerate(_flat(job)):
            replicas = pod_set.get("replicas")
            out.append(
                {
                    "name": _pod_set_name(job, k),
                    "count": 1 if replicas is None else int(replicas),
                    "template": copy.deepcopy(_at(component, str(pod_set.get("path", "")))),
                }
            )
        return out

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        by_name = {info.name: info for info in infos}
        for component in _components(job):
            component.pop("podSetInfos", None)
        for k, (component, j, _) in enumerate(_flat(job)):
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


INTEGRATION = Integration(
    name="workload.codeflare.dev/appwrapper",
    kind="AppWrapper",
    group="workload.codeflare.dev",
    version="v1beta2",
    plural="appwrappers",
    adapter=AppWrapperAdapter,
)
