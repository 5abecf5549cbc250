"""A JobSet's pods on one machine: ranks, success policies, status counted in Jobs."""

from __future__ import annotations

from typing import Any

from pykueue.reconcilers.integrations import by_kind, check_job
from pykueue.reconcilers.integrations.jobset import JobSetAdapter
from pykueue.standalone.node import local_jobset


def _jobset(*replicated: tuple[str, int, int, int | None], **spec: Any) -> dict[str, Any]:
    jobs = []
    for name, replicas, parallelism, completions in replicated:
        job_spec: dict[str, Any] = {
            "parallelism": parallelism,
            "template": {"spec": {"containers": [{"name": "m"}]}},
        }
        if completions is not None:
            job_spec["completions"] = completions
        jobs.append({"name": name, "replicas": replicas, "template": {"spec": job_spec}})
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"replicatedJobs": jobs, **spec},
    }


def test_ranks_follow_declaration_order_then_job_then_pod() -> None:
    # completions below parallelism: a Job runs only `completions` pods, as its pod set counts.
    pods = local_jobset.pods(_jobset(("driver", 1, 1, None), ("workers", 2, 3, 2)))
    assert [(p.rank, p.name, p.job_global_index) for p in pods] == [
        (0, "js-driver-0-0", 0),
        (1, "js-workers-0-0", 1),
        (2, "js-workers-0-1", 1),
        (3, "js-workers-1-0", 2),
        (4, "js-workers-1-1", 2),
    ]
    env = local_jobset.environment(pods[4])
    assert (env["REPLICATED_JOB_NAME"], env["JOB_INDEX"], env["JOB_COMPLETION_INDEX"]) == (
        "workers",
        "1",
        "1",
    )
    fields = local_jobset.field_values(pods[4])
    assert fields["metadata.annotations['jobset.sigs.k8s.io/job-index']"] == "1"
    assert fields["metadata.labels['batch.kubernetes.io/job-completion-index']"] == "1"


def test_success_policy_all_and_any_over_targets() -> None:
    every = _jobset(("driver", 1, 1, None), ("workers", 2, 1, None))
    assert local_jobset.success(every, {0, 1}) is None  # workers job 1 (rank 2) still runs
    assert local_jobset.success(every, {0, 1, 2}) == "all jobs of driver, workers succeeded"
    workers_only = _jobset(
        ("driver", 1, 1, None), ("workers", 2, 1, None), successPolicy={"targetReplicatedJobs": ["workers"]}
    )
    assert local_jobset.success(workers_only, {1, 2}) is not None  # the driver need not finish
    any_worker = _jobset(
        ("driver", 1, 1, None),
        ("workers", 2, 2, None),
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["workers"]},
    )
    assert local_jobset.success(any_worker, {0}) is None  # the driver is not a target
    assert local_jobset.success(any_worker, {3}) is None  # half of workers job 1
    assert "workers-1" in str(local_jobset.success(any_worker, {3, 4}))


def test_status_counts_jobs_per_replicated_job() -> None:
    js = _jobset(("driver", 1, 1, None), ("workers", 2, 2, None))
    # Driver done; workers job 0 both pods live and ready; job 1 one pod live but not ready.
    status = local_jobset.replicated_jobs_status(js, {0}, [(1, True), (2, True), (3, False)], False)
    assert status == [
        {"name": "driver", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
        {"name": "workers", "ready": 1, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0},
    ]
    suspended = local_jobset.replicated_jobs_status(js, set(), [], True)
    assert [s["suspended"] for s in suspended] == [1, 2] and all(s["active"] == 0 for s in suspended)


def test_a_jobset_kueue_could_not_queue_names_the_field() -> None:
    integration = by_kind("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert integration is not None
    too_many = _jobset(*[(f"r{i}", 1, 1, None) for i in range(19)])
    problems = [f"{p.path}: {p.message}" for p in check_job(too_many, integration)]
    assert any(p.startswith("spec.podSets") or "podSets" in p for p in problems), problems
    assert check_job(_jobset(("a", 1, 1, None)), integration) == []


def test_the_kueue_adapter_reads_the_status_the_executor_writes() -> None:
    # waitForPodsReady and reclaimable pods come from JobSetAdapter, as in Kubernetes mode.
    adapter = JobSetAdapter()
    js = _jobset(("driver", 1, 1, None), ("workers", 2, 2, None))
    running = [(0, True), (1, True), (2, True), (3, True), (4, False)]
    js["status"] = {"replicatedJobsStatus": local_jobset.replicated_jobs_status(js, set(), running, False)}
    assert adapter.is_active(js) and not adapter.pods_ready(js)  # rank 4 is not ready yet
    running[4] = (4, True)
    js["status"] = {"replicatedJobsStatus": local_jobset.replicated_jobs_status(js, set(), running, False)}
    assert adapter.pods_ready(js)
    # The driver and workers job 0 have succeeded: their pods' quota may go back.
    js["status"] = {
        "replicatedJobsStatus": local_jobset.replicated_jobs_status(js, {0, 1, 2}, running[3:], False)
    }
    assert adapter.pods_ready(js)
    assert adapter.reclaimable_pods(js) == [{"name": "driver", "count": 1}, {"name": "workers", "count": 2}]
