"""What one pod's exit means for its Job or JobSet, as their controllers decide it.

A Job: exit 0 completes the index, and the Job once ``completions`` indexes have;
any other exit is a failure, retried after the back-off until ``backoffLimit``
(default 6) is exceeded, when the Job fails. A gang (see `job_spec.is_gang`)
cannot go on without one of its ranks: a failure stops the others and the whole
gang starts again after the back-off.

A JobSet: its success policy may be met by a pod's success; a failure restarts
the whole JobSet, every pod of it, until ``failurePolicy.maxRestarts``.

`pod_exited` counts the exit in the job's `JobRun` and returns an `Exit` that
says what the executor must do about it; it keeps no clock and stops nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykueue.standalone.node import local_jobset
from pykueue.standalone.node.job_spec import int_or, is_gang, job_counts, pod_slot
from pykueue.standalone.node.job_status import JobRun
from pykueue.store.base import Key, Manifest

DEFAULT_BACKOFF_LIMIT = 6
GANG_RETRY = -1  # the key of a whole gang's back-off in JobRun.retry_at


@dataclass(frozen=True, slots=True)
class Exit:
    """What the executor does about one pod's exit, in this order: start the back-off of
    ``retry`` (an index, or `GANG_RETRY`), record ``message``, stop the job's other pods."""

    retry: int | None = None
    message: str = ""
    stop_others: bool = False


def pod_exited(key: Key, job: Manifest, run: JobRun, index: int, code: int) -> Exit:
    """Pod ``index`` of ``job`` (a Job or a JobSet) exited with ``code``: count it in ``run``."""
    if job.get("kind") == local_jobset.KIND:
        return _jobset_pod_exited(key, job, run, index, code)
    spec = job.get("spec") or {}
    if code == 0:
        run.completed.add(index)
        _, completions = job_counts(spec)
        if len(run.completed) >= completions:
            run.outcome = ("Complete", "Completed", f"{completions} pod(s) succeeded")
            return Exit(message=f"{key.namespace}/{key.name}: completed")
        return Exit()
    run.failed += 1
    run.last_failure = f"pod {index} exited with {code}"
    limit = int_or(spec.get("backoffLimit"), DEFAULT_BACKOFF_LIMIT)
    if run.failed > limit:
        run.outcome = (
            "Failed",
            "BackoffLimitExceeded",
            f"pod {index} exited with {code}; {run.failed} failure(s) exceed backoffLimit {limit}",
        )
        return Exit(message=f"{key.namespace}/{key.name}: failed ({run.outcome[2]})", stop_others=True)
    if is_gang(job):
        # A rank is gone: the others cannot go on without it. Stop them; the whole gang
        # starts again after the back-off.
        return Exit(
            retry=GANG_RETRY,
            message=f"{key.namespace}/{key.name}: pod {index} of the gang exited with {code}; restarting the gang",
            stop_others=True,
        )
    return Exit(retry=index)


def _jobset_pod_exited(key: Key, job: Manifest, run: JobRun, index: int, code: int) -> Exit:
    """A JobSet's pod ended: its success policy may be met; a failure restarts it, or fails it."""
    name = pod_slot(job, index).name
    if code == 0:
        run.completed.add(index)
        met = local_jobset.success(job, run.completed)
        if met is not None:
            run.outcome = (local_jobset.COMPLETED, "AllJobsCompleted", met)
            # successPolicy Any: the others are not needed any more.
            return Exit(message=f"{key.namespace}/{key.name}: completed ({met})", stop_others=True)
        return Exit()
    run.failed += 1
    run.last_failure = f"pod {name} exited with {code}"
    limit = local_jobset.max_restarts(job)
    if run.restarts >= limit:
        message = f"pod {name} exited with {code}; {run.restarts} restart(s) used of maxRestarts {limit}"
        run.outcome = (local_jobset.FAILED, "ReachedMaxRestarts", message)
        return Exit(message=f"{key.namespace}/{key.name}: failed ({message})", stop_others=True)
    # As the JobSet controller: a failed Job restarts the whole JobSet, every pod of it.
    run.restarts += 1
    run.completed.clear()
    return Exit(
        retry=GANG_RETRY,
        message=(
            f"{key.namespace}/{key.name}: pod {name} exited with {code}; restarting the JobSet "
            f"(restart {run.restarts} of {limit})"
        ),
        stop_others=True,
    )
