"""The batch/v1 Job integration end to end: cohorts, preemption, flavors on pods, partial admission.

Every test names its cluster-scoped objects after its namespace, so tests never
see each other's queues, and removes them afterwards (the ``kueue`` fixture).
"""

from __future__ import annotations

from typing import Any

from ..conftest import NodeFactory
from ..controlplane import ApiError
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, wait


def _flavor(name: str, node_labels: dict[str, str] | None = None, tolerations: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def _cluster_queue(
    name: str,
    flavor: str,
    cpu: str,
    *,
    cohort: str | None = None,
    borrowing_limit: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    cpu_quota: dict[str, Any] = {"name": "cpu", "nominalQuota": cpu}
    if borrowing_limit is not None:
        cpu_quota["borrowingLimit"] = borrowing_limit
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": flavor, "resources": [cpu_quota, {"name": "memory", "nominalQuota": "64Gi"}]}
                ],
            }
        ],
        **spec,
    }
    if cohort:
        body["cohortName"] = cohort
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": body,
    }


def _local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def _admitted(kueue: Kueue, job: dict[str, Any]) -> dict[str, Any] | None:
    workload = kueue.workload_of(job)
    return workload if is_true(workload, "Admitted") else None


def _running(kueue: Kueue, namespace: str, name: str) -> bool:
    return kueue.job(namespace, name)["spec"].get("suspend") is False


def test_borrowing_across_a_cohort_shows_in_cluster_queue_status(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(2)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-a", f"{ns}-flavor", "2", cohort=f"{ns}-cohort"))
    kueue.apply(_cluster_queue(f"{ns}-b", f"{ns}-flavor", "4", cohort=f"{ns}-cohort"))
    kueue.apply(_local_queue(ns, "queue-a", f"{ns}-a"))
    job = kueue.create_job(ns, job_manifest("wide", "queue-a", parallelism=5, run_duration="30s"))

    wait(lambda: _admitted(kueue, job), 30, "the 5-cpu job admitted in a 2-cpu queue")
    wait(lambda: _running(kueue, ns, "wide"), 30, "the job running")

    def borrowed() -> dict[str, str] | None:
        status = kueue.cluster_queue(f"{ns}-a").get("status") or {}
        for flavor in status.get("flavorsReservation") or []:
            for res in flavor["resources"]:
                if res["name"] == "cpu" and res["total"] == "5":
                    return dict(res)
        return None

    assert wait(borrowed, 30, "ClusterQueue a reserving 5 cpu")["borrowed"] == "3"
    status = kueue.cluster_queue(f"{ns}-a")["status"]
    assert status["admittedWorkloads"] == 1 and status["reservingWorkloads"] == 1


def test_reclaim_preempts_the_borrower_which_is_suspended_and_resumed_later(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(2)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-a", f"{ns}-flavor", "2", cohort=f"{ns}-cohort"))
    kueue.apply(
        _cluster_queue(
            f"{ns}-b", f"{ns}-flavor", "4", cohort=f"{ns}-cohort", preemption={"reclaimWithinCohort": "Any"}
        )
    )
    kueue.apply(_local_queue(ns, "queue-a", f"{ns}-a"))
    kueue.apply(_local_queue(ns, "queue-b", f"{ns}-b"))
    borrower = kueue.create_job(ns, job_manifest("borrower", "queue-a", parallelism=5, run_duration="4s"))
    wait(lambda: _admitted(kueue, borrower) and _running(kueue, ns, "borrower"), 30, "the borrower running")

    owner = kueue.create_job(ns, job_manifest("owner", "queue-b", parallelism=3, run_duration="2s"))
    wait(lambda: _admitted(kueue, owner), 30, "the owner admitted by reclaiming its quota")
    victim = wait(
        lambda: (w := kueue.workload_of(borrower)) and is_true(w, "Evicted") and w, 30, "the borrower evicted"
    )
    preempted = condition(victim, "Preempted")
    assert preempted is not None and preempted["reason"] == "InCohortReclamation", preempted
    assert is_true(victim, "Requeued")
    wait(lambda: kueue.job(ns, "borrower")["spec"].get("suspend") is True, 30, "the borrower suspended")

    wait(lambda: is_true(kueue.job(ns, "owner"), "Complete"), 60, "the owner to complete")
    wait(lambda: _admitted(kueue, borrower) and _running(kueue, ns, "borrower"), 60, "the borrower resumed")
    wait(lambda: is_true(kueue.job(ns, "borrower"), "Complete"), 60, "the borrower to complete")


def test_flavor_node_selector_and_tolerations_reach_the_pods_and_are_restored(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    ns = kube_namespace
    pool = f"pool-{ns}"
    on_demand = {n["metadata"]["name"] for n in fake_nodes(1, labels={"pool": "other"})}
    spot = {
        n["metadata"]["name"]
        for n in fake_nodes(2, labels={"pool": pool}, taints=[f"spot-{ns}=true:NoSchedule"])
    }
    toleration = {"key": f"spot-{ns}", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    kueue.apply(_flavor(f"{ns}-spot", {"pool": pool}, [toleration]))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-spot", "8"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    job = kueue.create_job(ns, job_manifest("placed", "queue", parallelism=2, run_duration="20s"))

    wait(lambda: _admitted(kueue, job) and _running(kueue, ns, "placed"), 30, "the job running")
    template = kueue.job(ns, "placed")["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"pool": pool}
    assert toleration in template["tolerations"]
    pods = wait(
        lambda: (
            (p := kueue.pods_of(ns, "placed"))
            and len(p) == 2
            and all(x["spec"].get("nodeName") for x in p)
            and p
        ),
        30,
        "two pods bound",
    )
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"pool": pool}
        assert pod["spec"]["nodeName"] in spot and pod["spec"]["nodeName"] not in on_demand

    # Deactivating the Workload evicts it: the Job is suspended and its template restored.
    workload = kueue.workload_of(job)
    assert workload is not None
    kueue.cluster.kubectl(
        "patch",
        "workload",
        workload["metadata"]["name"],
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"active":false}}',
    )
    restored = wait(
        lambda: (
            (j := kueue.job(ns, "placed"))["spec"].get("suspend") is True
            and "nodeSelector" not in j["spec"]["template"]["spec"]
            and j
        ),
        30,
        "the job suspended with its template restored",
    )
    assert "tolerations" not in restored["spec"]["template"]["spec"]


def test_partial_admission_lowers_parallelism(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(2)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "9"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    manifest = job_manifest(
        "partial",
        "queue",
        parallelism=20,
        completions=20,
        run_duration="1s",
        annotations={"kueue.x-k8s.io/job-min-parallelism": "5"},
    )
    job = kueue.create_job(ns, manifest)

    workload = wait(lambda: _admitted(kueue, job), 30, "partial admission")
    assert workload["spec"]["podSets"][0]["count"] == 20
    assert workload["spec"]["podSets"][0]["minCount"] == 5
    assert workload["status"]["admission"]["podSetAssignments"][0]["count"] == 9
    running = wait(
        lambda: (j := kueue.job(ns, "partial"))["spec"].get("suspend") is False and j, 30, "running"
    )
    assert running["spec"]["parallelism"] == 9
    assert running["spec"]["completions"] == 20
    wait(lambda: is_true(kueue.job(ns, "partial"), "Complete"), 90, "the job to complete")
    wait(lambda: is_true(kueue.workload_of(job), "Finished"), 30, "Workload Finished")


def test_reclaimable_pods_free_quota_before_the_job_ends(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    # Two pods at a time, three completions: after the first two succeed one pod is left,
    # and the other cpu goes back to the queue while the third pod still runs.
    long = kueue.create_job(
        ns, job_manifest("long", "queue", parallelism=2, completions=3, run_duration="8s")
    )
    wait(lambda: _admitted(kueue, long), 30, "the first job admitted")
    waiting = kueue.create_job(ns, job_manifest("waiting", "queue", parallelism=1, run_duration="1s"))
    reclaimed = wait(
        lambda: (w := kueue.workload_of(long)) and w["status"].get("reclaimablePods") and w,
        30,
        "reclaimable pods",
    )
    assert reclaimed["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    wait(lambda: _admitted(kueue, waiting), 30, "the second job admitted on the reclaimed cpu")
    assert not is_true(kueue.job(ns, "long"), "Complete"), "admitted only after the first job ended"
    wait(lambda: is_true(kueue.job(ns, "long"), "Complete"), 60, "the first job to complete")


def test_a_higher_priority_job_preempts_within_its_cluster_queue(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    for name, value in ((f"{ns}-low", 10), (f"{ns}-high", 1000)):
        kueue.apply(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(
        _cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2", preemption={"withinClusterQueue": "LowerPriority"})
    )
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    low_job = job_manifest("low", "queue", parallelism=2, run_duration="3s")
    low_job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{ns}-low"
    low = kueue.create_job(ns, low_job)
    wait(lambda: _admitted(kueue, low) and _running(kueue, ns, "low"), 30, "the low-priority job running")

    high_job = job_manifest("high", "queue", parallelism=2, run_duration="1s")
    high_job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"{ns}-high"
    high = kueue.create_job(ns, high_job)
    workload = wait(lambda: _admitted(kueue, high), 30, "the high-priority job admitted")
    assert workload["spec"]["priorityClassRef"]["name"] == f"{ns}-high"
    assert workload["spec"]["priority"] == 1000
    victim = wait(
        lambda: (w := kueue.workload_of(low)) and is_true(w, "Preempted") and w, 30, "low preempted"
    )
    assert condition(victim, "Preempted")["reason"] == "InClusterQueue"  # type: ignore[index]
    wait(lambda: is_true(kueue.job(ns, "high"), "Complete"), 60, "the high-priority job to complete")
    wait(lambda: is_true(kueue.job(ns, "low"), "Complete"), 60, "the low-priority job resumed and completed")


def test_a_failed_job_finishes_its_workload_and_releases_the_quota(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    failing = job_manifest("failing", "queue", parallelism=2)
    failing["spec"]["backoffLimit"] = 0
    failing["spec"]["template"]["metadata"]["annotations"]["pykueue.test/fail"] = "true"
    job = kueue.create_job(ns, failing)
    finished = wait(lambda: (w := kueue.workload_of(job)) and is_true(w, "Finished") and w, 60, "Finished")
    assert condition(finished, "Finished")["reason"] == "Failed"  # type: ignore[index]
    assert is_true(kueue.job(ns, "failing"), "Failed")
    after = kueue.create_job(ns, job_manifest("after", "queue", parallelism=2))
    wait(lambda: _admitted(kueue, after), 30, "the next job admitted on the released quota")


def _refuse_start(ns: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy refusing (422 Invalid) to unsuspend the labelled Jobs of ``ns``:
    an admission update the API server will never take, as a TrainJob's immutable spec.trainer."""
    api = "admissionregistration.k8s.io/v1"
    policy = {
        "apiVersion": api,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"{ns}-refuse-start"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["jobs"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "object.spec.suspend == true",
                    "message": "this job may not start",
                    "reason": "Invalid",
                }
            ],
        },
    }
    binding = {
        "apiVersion": api,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"{ns}-refuse-start"},
        "spec": {
            "policyName": f"{ns}-refuse-start",
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "objectSelector": {"matchLabels": {"pykueue.test/refuse-start": "true"}},
            },
        },
    }
    return [policy, binding]


def test_a_job_refusing_its_admission_update_gives_its_quota_back_and_says_why(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    for doc in _refuse_start(ns):
        kueue.apply(doc)
    # The policy takes effect a moment after it is made: an unqueued probe Job shows when.
    probe = job_manifest("probe", None)
    probe["metadata"]["labels"]["pykueue.test/refuse-start"] = "true"
    kueue.create_job(ns, probe)

    def refused() -> bool:
        try:
            kueue.cluster.request(
                "PATCH",
                f"/apis/batch/v1/namespaces/{ns}/jobs/probe",
                {"spec": {"suspend": False}},
                content_type="application/merge-patch+json",
            )
        except ApiError as exc:
            return exc.status == 422
        kueue.cluster.request(
            "PATCH",
            f"/apis/batch/v1/namespaces/{ns}/jobs/probe",
            {"spec": {"suspend": True}},
            content_type="application/merge-patch+json",
        )
        return False

    wait(refused, 30, "the policy to refuse unsuspending a labelled Job")
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "1"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    manifest = job_manifest("refused", "queue")
    manifest["metadata"]["labels"]["pykueue.test/refuse-start"] = "true"
    refused_job = kueue.create_job(ns, manifest)

    def failed_to_start() -> dict[str, Any] | None:
        workload = kueue.workload_of(refused_job)
        finished = condition(workload, "Finished")
        return workload if finished and finished["reason"] == "FailedToStart" else None

    workload = wait(failed_to_start, 60, "the Workload finished as FailedToStart")
    message = condition(workload, "Finished")["message"]  # type: ignore[index]
    assert message.startswith(f"Job {ns}/refused refused its admission update: ")
    assert "this job may not start" in message
    warned = [(t, r) for t, r, _ in kueue.events_of(refused_job)]
    assert ("Warning", "FailedToStart") in warned
    assert ("Warning", "FailedToStart") in [(t, r) for t, r, _ in kueue.events_of(workload)]
    # Its quota is free again: a Job the policy lets start is admitted and runs.
    kueue.create_job(ns, job_manifest("next", "queue"))
    wait(lambda: _running(kueue, ns, "next"), 60, "the next job running in the freed quota")
