"""Job kinds, one module per kind (upstream's "integrations"), and the one list of them.

Each module describes its kind with an `Integration` (``INTEGRATION``) and implements
`pykueue.reconcilers.jobframework.JobAdapter`. This package is the single place that
names them all, as upstream's jobs.go does; the framework itself never names a kind.
Which ones a controller manages is the configuration's ``integrations.frameworks``
(`registry`); importing a module here registers nothing anywhere.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from pykueue.api import manifests
from pykueue.errors import FieldProblem, ValidationError
from pykueue.reconcilers import job_validation, jobframework, tas_annotations
from pykueue.reconcilers.integrations import (
    appwrapper,
    batch_job,
    jobset,
    kubeflow,
    leaderworkerset,
    pod,
    ray,
    trainjob,
)
from pykueue.store.base import Manifest

BATCH_JOB = batch_job.INTEGRATION.name
AVAILABLE: tuple[jobframework.Integration, ...] = (
    batch_job.INTEGRATION,
    jobset.INTEGRATION,
    pod.INTEGRATION,
    pod.DEPLOYMENT,
    pod.STATEFULSET,
    leaderworkerset.INTEGRATION,
    kubeflow.PYTORCHJOB,
    kubeflow.TFJOB,
    kubeflow.PADDLEJOB,
    kubeflow.XGBOOSTJOB,
    kubeflow.JAXJOB,
    kubeflow.MPIJOB,
    ray.RAYJOB,
    ray.RAYCLUSTER,
    appwrapper.INTEGRATION,
    trainjob.INTEGRATION,
)
# Upstream's default when the configuration lists no framework.
DEFAULT_FRAMEWORKS: tuple[str, ...] = (batch_job.INTEGRATION.name,)
# What standalone mode runs as local processes (standalone/node/executor.py).
STANDALONE_FRAMEWORKS: tuple[str, ...] = (batch_job.INTEGRATION.name, jobset.INTEGRATION.name)


def by_name() -> dict[str, jobframework.Integration]:
    return {integration.name: integration for integration in AVAILABLE}


def by_kind(api_version: str, kind: str) -> jobframework.Integration | None:
    """The integration of a manifest's ``apiVersion`` and ``kind``, if pykueue has one."""
    for integration in AVAILABLE:
        if integration.kind == kind and integration.api_version == api_version:
            return integration
    return None


def registry(frameworks: Iterable[str] = DEFAULT_FRAMEWORKS) -> jobframework.Registry:
    """The adapters of the frameworks named (`jobframework.UnknownFramework` for an unknown name)."""
    return jobframework.Registry.of(AVAILABLE, frameworks)


def check_job(doc: Manifest, integration: jobframework.Integration) -> list[FieldProblem]:
    """What is wrong with a job manifest of an integrated kind, as Kueue would see it.

    The job's own fields are its API server's business; what is checked here is what
    Kueue needs of it: a name (or generateName), a valid queue name, pod sets that can
    be read, and a Workload made of them that passes the Workload rules (pod set
    counts, names, resource quantities).
    """
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return [FieldProblem("metadata", "required field is missing")]
    problems: list[FieldProblem] = []
    if not meta.get("name") and not meta.get("generateName"):
        problems.append(FieldProblem("metadata.name", "name or generateName is required"))
    if integration.adapter is None:
        return problems  # queued through its pods: what matters is on them
    problems.extend(job_validation.validate_prebuilt_workload(integration, doc))
    adapter = integration.adapter()
    named = copy.deepcopy(doc)
    named["metadata"]["name"] = meta.get("name") or f"{str(meta.get('generateName', '')).rstrip('-.')}-x"
    named["metadata"].setdefault("uid", "validate")
    try:
        workload = jobframework.workload_for(adapter, named)
    except trainjob.MissingRuntime:
        # Its pod sets are its runtime's, which lives in the cluster: what can be checked here is its labels.
        return [*problems, *job_validation.validate_on_create(doc)]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return [*problems, FieldProblem("spec", f"cannot read the pod sets Kueue would queue: {exc}")]
    # The topology annotations' rules, as the webhook applies them (the MissingRuntime case
    # above gets them from validate_on_create).
    problems.extend(tas_annotations.problems(doc))
    try:
        manifests.parse_object(workload)
    except ValidationError as err:
        for problem in err.problems:
            path = problem.path
            if path.startswith("spec.queueName"):
                path = f"metadata.labels[{jobframework.QUEUE_NAME_LABEL}]"
            problems.append(FieldProblem(path, f"{problem.message} (in the Workload Kueue would make of it)"))
    return problems
