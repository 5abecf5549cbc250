"""One job of a simulation: what it asks for, how long it runs, how often it checkpoints.

A `Job` is the simulator's unit of demand, read from a trace row or made by the
generator. It becomes one engine `Workload` (one pod set per job pod set,
per-pod requests in milli-units) when it arrives. Times are integer
microseconds, like the engine's clock.

A job with a ``max_execution`` (upstream's ``maximumExecutionTimeSeconds``) that has
been admitted that long in all, across preemptions, is stopped for good: deactivated,
as upstream's controller does, never requeued, its work lost.

Work and checkpoints: a job needs ``runtime`` microseconds of running time. A
job that checkpoints every ``checkpoint`` microseconds of its own progress keeps
its progress up to the last checkpoint when it is preempted; without a
checkpoint interval it keeps nothing and starts over. The runtime does not
depend on how many pods a partial admission gave it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykueue.engine import intake
from pykueue.engine.topology_requests import TopologyRequest
from pykueue.engine.workloads import PodSet, Workload

SECOND = 10**6


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    """A group of identical pods: how many, at least how many, and per-pod requests (milli-units)."""

    name: str
    count: int
    requests: dict[str, int]
    min_count: int | None = None
    topology: TopologyRequest | None = None  # topology-aware scheduling (docs/topology.md)


@dataclass(frozen=True, slots=True)
class Job:
    """One row of a trace."""

    name: str
    namespace: str
    queue: str  # the LocalQueue's name, in ``namespace``
    submit: int  # microseconds from the start of the simulation
    runtime: int  # microseconds of running time the job needs
    pod_sets: tuple[PodSetSpec, ...]
    priority: int = 0
    priority_class: str = ""
    job_class: str = ""  # the class reported on (upstream's workload className)
    checkpoint: int | None = None  # microseconds of progress between checkpoints
    where: str = ""  # file:line, for messages
    # Upstream's maximumExecutionTimeSeconds: admitted this long in all, the job is deactivated.
    max_execution: int | None = None  # whole seconds, in microseconds

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def queue_key(self) -> str:
        return f"{self.namespace}/{self.queue}"

    def total_requests(self, minimum: bool = False) -> dict[str, int]:
        """All pods' requests per resource (with ``minimum``, at each pod set's minCount)."""
        result: dict[str, int] = {}
        for ps in self.pod_sets:
            count = ps.min_count if minimum and ps.min_count is not None else ps.count
            for resource, value in ps.requests.items():
                result[resource] = result.get(resource, 0) + value * count
        return result

    def workload(self, uid: str) -> Workload:
        """The engine workload this job becomes when it is submitted."""
        wl = Workload(
            namespace=self.namespace,
            name=self.name,
            queue_name=self.queue,
            pod_sets=[
                PodSet(ps.name, ps.count, dict(ps.requests), ps.min_count, topology=ps.topology)
                for ps in self.pod_sets
            ],
            priority=self.priority,
            priority_class=self.priority_class,
            created=self.submit,
            uid=uid,
        )
        # What a preemption loses, for cost-aware preemption (engine/lost_work.py); read only
        # when a ClusterQueue has that policy.
        wl.checkpoint_interval = self.checkpoint
        # Its declared limit, for the policies that read one (a reservation's backfill and start,
        # waitForEnd): the simulator itself ends the job at the limit (driver.admitted) and never
        # runs the engine's deadlines (`lifecycle`), so both agree on when it ends.
        if self.max_execution is not None:
            wl.max_execution_seconds = self.max_execution // SECOND
        wl.shape = intake.shape_of(wl)
        return wl


def saved_progress(progress: int, ran: int, checkpoint: int | None) -> int:
    """Progress kept after a preemption: the last checkpoint reached, or what was kept before."""
    if checkpoint is None or checkpoint <= 0:
        return progress
    return ((progress + ran) // checkpoint) * checkpoint
