"""Kubeflow Trainer v2's TrainJob (``trainer.kubeflow.org/v1alpha1``).

    TrainJob ── spec.runtimeRef ──▶ ClusterTrainingRuntime / TrainingRuntime
       │                             spec.template: the JobSet the trainer will make
       │                             spec.mlPolicy.numNodes: default node count
       ├ spec.trainer {numNodes, resourcesPerNode} ──▶ override the runtime's trainer job
       ├ spec.suspend ──▶ the trainer suspends / resumes its JobSet (whose controller
       │                  deletes / makes the pods)
       └ spec.runtimePatches[manager=kueue.x-k8s.io/manager] ──▶ where admission writes each
                          replicated job's node selector, tolerations, labels, annotations

A TrainJob alone does not say what it runs: its runtime's JobSet template does. As
upstream Kueue, the pod sets are that JobSet's replicated jobs, one per replicated job,
``replicas x pods per Job``, after the TrainJob's own settings are applied the way the
trainer applies them: the replicated job labelled ``trainer.kubeflow.org/trainjob-ancestor-step:
trainer`` runs ``numNodes`` pods (the TrainJob's ``spec.trainer.numNodes``, else the runtime's
``mlPolicy.numNodes``, else 1) and its ``node`` container asks for ``resourcesPerNode``.

The runtime is read by the reconciler before the adapter is asked anything
(`TrainJobAdapter.resolve`); a TrainJob whose runtime does not exist gets no Workload
until it does. The JobSet the trainer makes is owned by the TrainJob, so it is never
queued on its own.

Admission does not touch the runtime nor the TrainJob's trainer section: it writes a
runtime patch owned by ``kueue.x-k8s.io/manager`` (as upstream), which the trainer merges
into the JobSet's pod templates; stopping removes that patch again. No partial admission.

The patch is added with its ``time`` already set, and removed (not emptied) on stop, so
the trainer's defaulting webhook has nothing to change in an admission: when it changes
anything (a changed patch gets a new time) it re-encodes the whole TrainJob, turning an
integer quantity of ``spec.trainer`` (``cpu: 1``) into a string (``"1"``), and the CRD's
``spec.trainer: self == oldSelf`` rule then refuses the update as changing an immutable field.

MultiKueue dispatches a TrainJob (``spec.managedBy``) as upstream: the copy is the spec
without Kueue's runtime patch (the worker's Kueue writes its own at its admission); the
runtime it names must exist on the manager (for the pod sets) and on the workers.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pykueue.reconcilers.jobframework import Finished, Integration, PodSetInfo, SpecMultiKueue, queue_name_of
from pykueue.store.base import Manifest

API_VERSION = "trainer.kubeflow.org/v1alpha1"
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
NODE_CONTAINER = "node"
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
RUNTIME = "TrainingRuntime"

RuntimeGetter = Callable[[str, str, str], Awaitable[Manifest]]
"""``await get(kind, namespace, name)``: the runtime object; raises when it does not exist."""


class MissingRuntime(KeyError):
    """A TrainJob's runtime has not been read (or does not exist)."""


def runtime_key(job: Manifest) -> tuple[str, str, str]:
    """(kind, namespace, name) of the runtime a TrainJob refers to (namespace empty for a cluster one)."""
    ref = (job.get("spec") or {}).get("runtimeRef") or {}
    kind = str(ref.get("kind") or CLUSTER_RUNTIME)
    namespace = "" if kind == CLUSTER_RUNTIME else str((job.get("metadata") or {}).get("namespace") or "")
    return kind, namespace, str(ref.get("name") or "")


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


class TrainJobAdapter:
    """trainer.kubeflow.org TrainJob through `pykueue.reconcilers.jobframework.JobAdapter`."""

    kind = "TrainJob"
    api_version = API_VERSION
    # The trainer refuses a runtime patch change while its JobSet's jobs are active.
    restore_when_inactive = True

    def __init__(self) -> None:
        # Runtime specs read by `resolve`, by (kind, namespace, name).
        self.runtimes: dict[tuple[str, str, str], Manifest] = {}

    async def resolve(self, job: Manifest, get: RuntimeGetter) -> None:
        """Read the job's runtime (again: a runtime may change) so pod sets can be computed."""
        key = runtime_key(job)
        runtime = await get(*key)
        self.runtimes[key] = copy.deepcopy(runtime.get("spec") or {})

    def _runtime(self, job: Manifest) -> Manifest:
        key = runtime_key(job)
        try:
            return self.runtimes[key]
        except KeyError:
            raise MissingRuntime(f"{key[0]} {key[2]!r} of the TrainJob has not been read") from None

    def jobset_template(self, job: Manifest) -> list[dict[str, Any]]:
        """The replicated jobs of the JobSet the trainer would make, with the TrainJob's settings applied."""
        runtime = self._runtime(job)
        replicated: list[dict[str, Any]] = copy.deepcopy(
            ((runtime.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        )
        trainer = (job.get("spec") or {}).get("trainer") or {}
        nodes = _int(trainer.get("numNodes"), _int((runtime.get("mlPolicy") or {}).get("numNodes"), 1))
        for rj in replicated:
            template = rj.setdefault("template", {})
            if ((template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL) != TRAINER_STEP:
                continue
            spec = template.setdefault("spec", {})
            spec["parallelism"] = spec["completions"] = nodes
            resources = trainer.get("resourcesPerNode")
            if resources is not None:
                for container in ((spec.get("template") or {}).get("spec") or {}).get("containers") or []:
                    if container.get("name") == NODE_CONTAINER:
                        container["resources"] = copy.deepcopy(resources)
        return replicated

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        out = []
        for rj in self.jobset_template(job):
            spec = (rj.get("template") or {}).get("spec") or {}
            parallelism = _int(spec.get("parallelism"), 1)
            completions = spec.get("completions")
            per_job = min(parallelism, int(completions)) if completions is not None else parallelism
            out.append(
                {
                    "name": str(rj["name"]),
                    "count": _int(rj.get("replicas"), 1) * per_job,
                    "template": copy.deepcopy(spec.get("template") or {}),
                }
            )
        return out

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def _kueue_patch(self, job: Manifest) -> dict[str, Any]:
        patches: list[dict[str, Any]] = job.setdefault("spec", {}).setdefault("runtimePatches", [])
        for patch in patches:
            if patch.get("manager") == KUEUE_PATCH_MANAGER:
                return patch
        # A new patch with its time set is left as it is by the trainer's webhook (see above).
        patch = {"manager": KUEUE_PATCH_MANAGER, "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        patches.append(patch)
        return patch

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        job.setdefault("spec", {})["suspend"] = False
        replicated = []
        for info in infos:
            pod_spec: dict[str, Any] = {}
            if info.node_selector:
                pod_spec["nodeSelector"] = dict(info.node_selector)
            if info.tolerations:
                pod_spec["tolerations"] = [dict(t) for t in info.tolerations]
            meta: dict[str, Any] = {}
            if info.labels:
                meta["labels"] = dict(info.labels)
            if info.annotations:
                meta["annotations"] = dict(info.annotations)
            pod: dict[str, Any] = {}
            if meta:
                pod["metadata"] = meta
            if pod_spec:
                pod["spec"] = pod_spec
            replicated.append({"name": info.name, "template": {"spec": {"template": pod}}})
        self._kueue_patch(job)["trainingRuntimeSpec"] = {"template": {"spec": {"replicatedJobs": replicated}}}

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        # What admission added lives only in our runtime patch: removing it restores the job.
        spec = job.get("spec") or {}
        patches = spec.get("runtimePatches") or []
        kept = [patch for patch in patches if patch.get("manager") != KUEUE_PATCH_MANAGER]
        if len(kept) == len(patches):
            return False
        if kept:
            spec["runtimePatches"] = kept
        else:
            spec.pop("runtimePatches", None)
        return True

    def _condition(self, job: Manifest, kind: str) -> Manifest | None:
        for cond in (job.get("status") or {}).get("conditions") or []:
            if cond.get("type") == kind and cond.get("status") == "True":
                return dict(cond)
        return None

    def finished(self, job: Manifest) -> Finished | None:
        done = self._condition(job, "Complete")
        if done is not None:
            return Finished(True, str(done.get("message") or "TrainJob completed"))
        failed = self._condition(job, "Failed")
        if failed is not None:
            return Finished(False, str(failed.get("message") or failed.get("reason") or "TrainJob failed"))
        return None

    def _statuses(self, job: Manifest) -> list[Manifest]:
        statuses: list[Manifest] = (job.get("status") or {}).get("jobsStatus") or []
        return statuses

    def is_active(self, job: Manifest) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in self._statuses(job))

    def pods_ready(self, job: Manifest) -> bool:
        try:
            wanted = sum(_int(rj.get("replicas"), 1) for rj in self.jobset_template(job))
        except MissingRuntime:
            return False
        ready = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in self._statuses(job))
        return ready >= wanted

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        statuses = {str(s.get("name")): s for s in self._statuses(job)}
        if not statuses:
            return []
        out = []
        for pod_set, rj in zip(self.pod_sets(job), self.jobset_template(job), strict=True):
            replicas = _int(rj.get("replicas"), 1)
            succeeded = int((statuses.get(pod_set["name"]) or {}).get("succeeded") or 0)
            if 0 < succeeded <= replicas:
                out.append({"name": pod_set["name"], "count": succeeded * (pod_set["count"] // replicas)})
        return out


# The trainer's own name in spec.managedBy.
TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"


def _strip_kueue_patch(remote: Manifest) -> None:
    spec = remote.get("spec") or {}
    patches = [p for p in spec.get("runtimePatches") or [] if p.get("manager") != KUEUE_PATCH_MANAGER]
    if patches:
        spec["runtimePatches"] = patches
    else:
        spec.pop("runtimePatches", None)


def multikueue_adapter() -> SpecMultiKueue:
    """A TrainJob through `pykueue.reconcilers.jobframework.MultiKueueAdapter`."""
    return SpecMultiKueue(("spec", "managedBy"), ("spec", "suspend"), TRAINJOB_CONTROLLER, _strip_kueue_patch)


INTEGRATION = Integration(
    name="trainer.kubeflow.org/trainjob",
    kind="TrainJob",
    group="trainer.kubeflow.org",
    version="v1alpha1",
    plural="trainjobs",
    adapter=TrainJobAdapter,
    multikueue=multikueue_adapter,
    prebuilt_workload=True,
)
