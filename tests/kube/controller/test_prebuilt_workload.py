"""Pre-built Workloads on the real control plane: a job naming one is queued by it, never twice.

Upstream's MultiKueue sends a worker each job copy with its Workload made beforehand and the
job labelled ``kueue.x-k8s.io/prebuilt-workload-name``. The job must be admitted through that
Workload, which it then controls; one that does not describe the job is finished OutOfSync and
the job stays suspended.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.reconcilers import jobframework
from pykueue.reconcilers.integrations.batch_job import BatchJobAdapter

from ..conftest import NodeFactory
from .conftest import KUEUE, ControllerThread, Kueue, condition, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue

PREBUILT = jobframework.PREBUILT_WORKLOAD_KEY


def _made_before(job: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """The Workload another party builds for ``job`` before it exists (no owner yet)."""
    named = copy.deepcopy(job)
    named["metadata"].update(namespace=namespace, uid="not-yet")
    workload = jobframework.workload_for(BatchJobAdapter(), named)
    workload["metadata"] = {"name": name, "namespace": namespace}
    return workload


def _workloads(kueue: Kueue, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kueue.cluster.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
    return items


def _queues(kueue: Kueue, ns: str) -> None:
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))


def test_a_job_is_admitted_through_the_workload_built_for_it(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    _queues(kueue, ns)
    copied = job_manifest("copied", "queue", cpu="1", run_duration="300s")
    copied["metadata"]["labels"][PREBUILT] = "built-before"
    kueue.apply(_made_before(copied, ns, "built-before"), ns)
    created = kueue.create_job(ns, copied)
    wait(lambda: kueue.job(ns, "copied")["spec"].get("suspend") is False, 60, "the job started")
    (workload,) = _workloads(kueue, ns)
    assert workload["metadata"]["name"] == "built-before"
    assert is_true(workload, "Admitted")
    (owner,) = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job",
        "copied",
        created["metadata"]["uid"],
        True,
    )
    # Its quota is counted once: a second 1-CPU job still fits the 2-CPU queue.
    other = kueue.create_job(ns, job_manifest("other", "queue", cpu="1", run_duration="300s"))
    wait(lambda: is_true(kueue.workload_of(other), "Admitted"), 60, "a second job admitted beside it")
    assert len(_workloads(kueue, ns)) == 2


def test_a_job_waits_for_its_workload_and_one_that_does_not_match_is_finished(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    _queues(kueue, ns)
    waiting = job_manifest("waiting", "queue", cpu="1", run_duration="300s")
    waiting["metadata"]["labels"][PREBUILT] = "not-there-yet"
    kueue.create_job(ns, waiting)
    mismatched = job_manifest("mismatched", "queue", cpu="1", run_duration="300s")
    mismatched["metadata"]["labels"][PREBUILT] = "for-two-pods"
    two_pods = job_manifest("mismatched", "queue", cpu="1", parallelism=2)
    kueue.apply(_made_before(two_pods, ns, "for-two-pods"), ns)
    kueue.create_job(ns, mismatched)

    def finished() -> dict[str, Any] | None:
        found = [w for w in _workloads(kueue, ns) if w["metadata"]["name"] == "for-two-pods"]
        return found[0] if found and condition(found[0], "Finished") else None

    out_of_sync = condition(wait(finished, 60, "the mismatched Workload finished"), "Finished")
    assert out_of_sync is not None
    assert (out_of_sync["status"], out_of_sync["reason"]) == ("True", "OutOfSync")
    # Neither job got a Workload of its own, and both are still held.
    assert [w["metadata"]["name"] for w in _workloads(kueue, ns)] == ["for-two-pods"]
    assert kueue.job(ns, "waiting")["spec"]["suspend"] is True
    assert kueue.job(ns, "mismatched")["spec"]["suspend"] is True
    # The Workload it waits for arrives: it is admitted through it.
    kueue.apply(_made_before(waiting, ns, "not-there-yet"), ns)
    wait(lambda: kueue.job(ns, "waiting")["spec"].get("suspend") is False, 60, "the waiting job started")
