"""What the executor counts for a Job or a JobSet, and the status it writes from that.

The status is the executor's alone (it plays the Job and JobSet controllers), so
everything it counts (completed indexes, failures, preemptions, interruptions,
usage) lives there and a restarted executor reads it back (`JobRun.from_status`).
A Job keeps its pod counts at the top level, as the Job controller does; a
JobSet's status has the JobSet controller's shape (``restarts``, Jobs counted per
replicated job) and its pod counts move under ``pykueue``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pykueue.standalone.node import local_jobset, probes
from pykueue.standalone.node.cgroups import Usage
from pykueue.standalone.node.job_spec import suspended, templates
from pykueue.standalone.node.pod_processes import Pod
from pykueue.store.base import Manifest

IMAGE_WARNING = "the container image is ignored in standalone mode: the command runs on this machine"


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class JobRun:
    """What the executor counts for one Job (mirrored into its status)."""

    completed: set[int] = field(default_factory=set)
    failed: int = 0
    preemptions: int = 0
    interruptions: int = 0
    start_time: str = ""
    outcome: tuple[str, str, str] | None = None  # (condition type, reason, message) once finished
    waiting: str = ""  # why a pod is not started (devices, no command, back-off)
    last_failure: str = ""  # the last failed pod's exit, in words ("pod 0 exited with 3")
    retry_at: dict[int, float] = field(default_factory=dict)  # index -> monotonic time it may start again
    cpu_seconds: float = 0.0
    memory_peak: int = 0
    gang_port: int = 0  # MASTER_PORT of the gang's current start
    restarts: int = 0  # a JobSet's restarts of all its pods (status.restarts)
    # Wall seconds during which at least one of its pods ran, for `report usage` to set
    # against the quota the ledger says it held (pods a server restart killed not counted).
    run_seconds: float = 0.0
    busy_since: float | None = None  # monotonic time its first live pod started

    @staticmethod
    def from_status(status: Manifest) -> JobRun:
        """What an earlier executor counted, from a Job's or a JobSet's status."""
        extra = status.get("pykueue") or {}
        usage = extra.get("usage") or {}
        run = JobRun(
            completed=set(extra.get("completed", [])),
            failed=int(counts_of(status).get("failed", 0)),
            preemptions=int(extra.get("preemptions", 0)),
            interruptions=int(extra.get("interruptions", 0)),
            last_failure=str(extra.get("lastFailure") or ""),
            start_time=str(status.get("startTime", "")),
            cpu_seconds=float(usage.get("cpuSeconds", 0.0)),
            memory_peak=int(usage.get("memoryPeakBytes", 0)),
            restarts=int(status.get("restarts", 0)),
            run_seconds=float(usage.get("runSeconds", 0.0)),
        )
        for cond in status.get("conditions", []):
            finished = ("Complete", local_jobset.COMPLETED, "Failed")
            if cond.get("type") in finished and cond.get("status") == "True":
                run.outcome = (cond["type"], cond.get("reason", ""), cond.get("message", ""))
        return run

    def add_usage(self, usage: Usage) -> None:
        self.cpu_seconds = round(self.cpu_seconds + usage.cpu_seconds, 3)
        self.memory_peak = max(self.memory_peak, usage.memory_peak_bytes)


def counts_of(status: Manifest) -> Manifest:
    """Where a status keeps its pod counts: a Job's top level, a JobSet's ``pykueue`` section."""
    if "replicatedJobsStatus" in status or "restarts" in status:
        counts: Manifest = status.get("pykueue") or {}
        return counts
    return status


def status_of(job: Manifest, run: JobRun, pods: Mapping[int, Pod]) -> Manifest:
    """The status ``job`` should have: ``run``'s counts and ``pods``, its conditions' times kept."""
    counts = {
        "active": len(pods),
        "ready": sum(1 for pod in pods.values() if pod.ready and not pod.stopping),
        "succeeded": len(run.completed),
        "failed": run.failed,
    }
    status: Manifest = {
        **counts,
        "pykueue": {
            "completed": sorted(run.completed),
            "preemptions": run.preemptions,
            "interruptions": run.interruptions,
            "pods": [
                {
                    "index": pod.index,
                    "name": pod.name,
                    "pid": pod.process.pid,
                    "user": pod.user,
                    "devices": pod.devices,
                    "cgroup": pod.cgroup.name if pod.cgroup is not None else "",
                    "stopping": pod.stopping,
                }
                for pod in sorted(pods.values(), key=lambda p: p.index)
            ],
            "warnings": warnings(job),
            "waiting": run.waiting,
            "lastFailure": run.last_failure,
            "usage": {
                "cpuSeconds": run.cpu_seconds,
                "memoryPeakBytes": run.memory_peak,
                "runSeconds": round(run.run_seconds, 3),
            },
        },
    }
    if run.start_time:
        status["startTime"] = run.start_time
    if job.get("kind") == local_jobset.KIND:
        status = _jobset_status(job, run, pods, status, counts)
    if run.outcome is not None:
        kind, reason, message = run.outcome
        status["conditions"] = [
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": now_text(),
            }
        ]
        status["completionTime"] = now_text()
    previous = job.get("status") or {}
    for cond in status.get("conditions", []):
        for old in previous.get("conditions", []):
            if old.get("type") == cond["type"]:
                cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])
    if previous.get("completionTime") and "completionTime" in status:
        status["completionTime"] = previous["completionTime"]
    return status


def _jobset_status(
    job: Manifest, run: JobRun, pods: Mapping[int, Pod], status: Manifest, counts: Manifest
) -> Manifest:
    """A JobSet's status as its controller writes it (Jobs counted per replicated job,
    ``restarts``), the pod counts moved under ``pykueue``."""
    live = [(pod.index, pod.ready) for pod in pods.values() if not pod.stopping]
    shaped: Manifest = {k: v for k, v in status.items() if k not in counts}
    shaped["pykueue"] = {**status["pykueue"], **counts}
    shaped["restarts"] = run.restarts
    shaped["replicatedJobsStatus"] = local_jobset.replicated_jobs_status(
        job, run.completed, live, suspended(job)
    )
    return shaped


def warnings(job: Manifest) -> list[str]:
    """What the Job asks for that standalone mode does not do (shown by describe)."""
    found = [IMAGE_WARNING] if _has_image(job) else []
    for template in templates(job):
        containers = (template.get("spec") or {}).get("containers") or []
        if containers:
            _, probe_warning = probes.Probe.of_container(containers[0])
            if probe_warning and probe_warning not in found:
                found.append(probe_warning)
    return found


def _has_image(job: Manifest) -> bool:
    return any(c.get("image") for t in templates(job) for c in (t.get("spec") or {}).get("containers") or [])
