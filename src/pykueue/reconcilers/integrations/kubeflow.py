"""Kubeflow's training jobs: PyTorchJob, TFJob, PaddleJob, XGBoostJob, JAXJob (training-operator,
``kubeflow.org/v1``) and MPIJob (mpi-operator, ``kubeflow.org/v2beta1``).

    <kind> ── <x>ReplicaSpecs{Master, Worker, ...} ──▶ one pod set per replica type present,
              in the kind's fixed order, named in lower case, count = replicas (default 1)
       └ spec.runPolicy.suspend ──▶ the operator deletes the pods (suspend) or makes them
                                     from the templates as they are now (resume)

All of them share one shape, so one adapter class serves them, told the field of its
replica specs and the order of its replica types. Admission merges each replica
type's flavors into that type's pod template; stopping restores them. No partial
admission (as upstream). Finished is the ``Succeeded`` or ``Failed`` condition;
pods are ready once the ``Running`` condition is true.

MultiKueue dispatches all of them, as upstream does, through one adapter: they say who
manages them in ``spec.runPolicy.managedBy`` (training-operator 1.9+, mpi-operator 0.6+)
and are held with ``spec.runPolicy.suspend``; the copy is the whole spec, the status
mirrored is the whole status.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
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


@dataclass
class ReplicaJobAdapter:
    """A kind whose pods are described by a map of replica type to ``{replicas, template}``."""

    kind: str
    api_version: str
    replica_specs_field: str
    replica_types: tuple[str, ...]

    def _specs(self, job: Manifest) -> dict[str, Any]:
        specs: dict[str, Any] = (job.get("spec") or {}).get(self.replica_specs_field) or {}
        return specs

    def _present(self, job: Manifest) -> list[str]:
        specs = self._specs(job)
        return [t for t in self.replica_types if specs.get(t) is not None]

    def _run_policy(self, job: Manifest) -> dict[str, Any]:
        policy: dict[str, Any] = job.setdefault("spec", {}).setdefault("runPolicy", {})
        return policy

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        specs = self._specs(job)
        out = []
        for replica_type in self._present(job):
            spec = specs[replica_type]
            replicas = spec.get("replicas")
            out.append(
                {
                    "name": replica_type.lower(),
                    "count": 1 if replicas is None else int(replicas),
                    "template": copy.deepcopy(spec.get("template") or {}),
                }
            )
        return out

    def is_suspended(self, job: Manifest) -> bool:
        return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        self._run_policy(job)["suspend"] = True

    def _templates(self, job: Manifest) -> dict[str, dict[str, Any]]:
        specs = self._specs(job)
        return {t.lower(): specs[t].setdefault("template", {}) for t in self._present(job)}

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        self._run_policy(job)["suspend"] = False
        templates = self._templates(job)
        for info in infos:
            if info.name in templates:
                merge_into_template(templates[info.name], info)

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        templates = self._templates(job)
        changed = False
        for info in infos:
            if info.name in templates:
                changed = restore_template(templates[info.name], info) or changed
        return changed

    def _condition(self, job: Manifest, kind: str) -> Manifest | None:
        for cond in (job.get("status") or {}).get("conditions") or []:
            if cond.get("type") == kind and cond.get("status") == "True":
                return dict(cond)
        return None

    def finished(self, job: Manifest) -> Finished | None:
        if (cond := self._condition(job, "Succeeded")) is not None:
            return Finished(True, str(cond.get("message") or f"{self.kind} succeeded"))
        if (cond := self._condition(job, "Failed")) is not None:
            return Finished(False, str(cond.get("message") or cond.get("reason") or f"{self.kind} failed"))
        return None

    def is_active(self, job: Manifest) -> bool:
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return any(int((s or {}).get("active") or 0) > 0 for s in statuses.values())

    def pods_ready(self, job: Manifest) -> bool:
        return self._condition(job, "Running") is not None

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        return []


# The operators' own names in spec.runPolicy.managedBy: the webhook may replace them (or
# nothing) with MultiKueue's; a job naming any other controller is left to it.
TRAINING_OPERATOR = "kubeflow.org/training-operator"
MPI_OPERATOR = "kubeflow.org/mpi-operator"


def multikueue_adapter(own_controller: str) -> SpecMultiKueue:
    """A Kubeflow job through `pykueue.reconcilers.jobframework.MultiKueueAdapter`."""
    return SpecMultiKueue(
        ("spec", "runPolicy", "managedBy"), ("spec", "runPolicy", "suspend"), own_controller
    )


def _training(kind: str, field: str, types: tuple[str, ...], prebuilt_workload: bool = True) -> Integration:
    api_version = "kubeflow.org/v1"

    def make() -> ReplicaJobAdapter:
        return ReplicaJobAdapter(kind, api_version, field, types)

    return Integration(
        name=f"kubeflow.org/{kind.lower()}",
        kind=kind,
        group="kubeflow.org",
        version="v1",
        plural=f"{kind.lower()}s",
        adapter=make,
        multikueue=lambda: multikueue_adapter(TRAINING_OPERATOR),
        prebuilt_workload=prebuilt_workload,
    )


PYTORCHJOB = _training("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker"))
TFJOB = _training("TFJob", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator"))
PADDLEJOB = _training("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker"))
XGBOOSTJOB = _training("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker"))
# Upstream takes no pre-built Workload for a JAXJob.
JAXJOB = _training("JAXJob", "jaxReplicaSpecs", ("Worker",), prebuilt_workload=False)


def _mpijob() -> ReplicaJobAdapter:
    return ReplicaJobAdapter("MPIJob", "kubeflow.org/v2beta1", "mpiReplicaSpecs", ("Launcher", "Worker"))


MPIJOB = Integration(
    name="kubeflow.org/mpijob",
    kind="MPIJob",
    group="kubeflow.org",
    version="v2beta1",
    plural="mpijobs",
    adapter=_mpijob,
    multikueue=lambda: multikueue_adapter(MPI_OPERATOR),
    prebuilt_workload=True,
)
