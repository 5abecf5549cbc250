"""A quota design: the queue objects one simulation runs on, and whether every job can run there.

A design is a list of manifests (ResourceFlavors, ClusterQueues, Cohorts,
LocalQueues, Namespaces, priority classes) read from YAML or made by the
generator. `Design.state` builds a fresh engine state from them for each run,
so two runs never share anything.

`Design.check` refuses a trace that could never finish, before any time is
simulated, naming the trace line: a job whose LocalQueue does not exist (or
points at a missing ClusterQueue), whose priority class is unknown, that
requests a resource its ClusterQueue does not cover, or that is larger than
everything its ClusterQueue could ever get (its nominal quota plus what it
may borrow, capped by the whole cohort tree).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pykueue.api import manifests, quantity
from pykueue.api.manifests import KubeObject
from pykueue.engine import loading
from pykueue.engine.cohort_tree import Node
from pykueue.engine.config import EngineConfig
from pykueue.engine.state import State
from pykueue.errors import InputError
from pykueue.sim.generator import CLASS_LABEL
from pykueue.sim.jobs import Job
from pykueue.sim.trace import TraceError

QUEUE_KINDS = frozenset(
    {
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "Namespace",
        "WorkloadPriorityClass",
        "PriorityClass",
        "AdmissionCheck",
        "LimitRange",
        "Topology",
    }
)


@dataclass(slots=True)
class Design:
    """The queue objects of one design, with a name to show in reports."""

    name: str
    objects: list[KubeObject]
    cq_classes: dict[str, str] = field(default_factory=dict)
    config: EngineConfig = field(default_factory=EngineConfig)

    @classmethod
    def load(cls, path: Path, name: str | None = None) -> Design:
        objects = manifests.load_paths([path], manifests.RELAXED)
        others = sorted({obj.kind for obj in objects if obj.kind not in QUEUE_KINDS})
        if others:
            raise InputError(
                f"{path}: a design holds queue objects only; found {', '.join(others)} "
                "(jobs come from the trace)"
            )
        if not any(obj.kind == "ClusterQueue" for obj in objects):
            raise InputError(f"{path}: no ClusterQueue in the design")
        classes = {}
        for obj in objects:
            if obj.kind == "ClusterQueue":
                labels = obj.metadata.labels
                classes[obj.metadata.name] = labels.get(CLASS_LABEL, obj.metadata.name)
        return cls(name or path.stem, objects, classes)

    def state(self) -> State:
        state = State(config=self.config)
        for obj in self.objects:
            loading.apply(state, obj)
        state.ensure_tree()
        return state

    def check(self, jobs: Iterable[Job]) -> list[Job]:
        """The jobs with priority class names resolved; TraceError if any can never run."""
        state = self.state()
        problems: list[str] = []
        result: list[Job] = []
        limits: dict[str, dict[str, int]] = {}
        for job in jobs:
            try:
                job = self._resolve_priority(state, job)
                cq = self._cluster_queue(state, job)
                self._check_size(state, job, cq, limits)
            except _JobProblem as problem:
                problems.append(f"{job.where} {problem.field}: {problem}")
                continue
            result.append(job)
        if problems:
            raise TraceError(problems)
        return result

    @staticmethod
    def _resolve_priority(state: State, job: Job) -> Job:
        if not job.priority_class:
            return job
        for kind in ("WorkloadPriorityClass", "PriorityClass"):
            value = state.priority_values.get((kind, job.priority_class))
            if value is not None:
                return dataclasses.replace(job, priority=value)
        known = sorted(name for _, name in state.priority_values)
        raise _JobProblem(
            "priority",
            f"no WorkloadPriorityClass or PriorityClass {job.priority_class} in the design"
            + (f" (known: {', '.join(known)})" if known else ""),
        )

    @staticmethod
    def _cluster_queue(state: State, job: Job) -> str:
        lq = state.local_queues.get(job.queue_key)
        if lq is None:
            known = sorted(state.local_queues)
            shown = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
            raise _JobProblem("queue", f"LocalQueue {job.queue_key} is not in the design (known: {shown})")
        if lq.cluster_queue not in state.cluster_queues:
            raise _JobProblem(
                "queue",
                f"LocalQueue {job.queue_key} points at ClusterQueue {lq.cluster_queue}, which is not in the design",
            )
        return lq.cluster_queue

    @staticmethod
    def _check_size(state: State, job: Job, cq_name: str, limits: dict[str, dict[str, int]]) -> None:
        ceiling = limits.get(cq_name)
        if ceiling is None:
            ceiling = limits[cq_name] = _ceilings(state, cq_name)
        cq = state.cluster_queues[cq_name]
        where = f"cohort {cq.cohort}" if cq.cohort else f"ClusterQueue {cq_name}"
        for resource, need in job.total_requests(minimum=True).items():
            if need == 0:
                continue
            if resource not in ceiling:
                raise _JobProblem(
                    "requests", f"requests {resource}, which ClusterQueue {cq_name} does not cover"
                )
            if need > ceiling[resource]:
                raise _JobProblem(
                    "requests",
                    f"needs {quantity.format_milli(need)} {resource} but {where} can give ClusterQueue "
                    f"{cq_name} at most {quantity.format_milli(ceiling[resource])}: the job could never start",
                )


class _JobProblem(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _ceilings(state: State, cq_name: str) -> dict[str, int]:
    """The most of each resource (in its best flavor) the ClusterQueue could ever hold."""
    node = state.nodes[cq_name]
    root = node.root()
    cq = state.cluster_queues[cq_name]
    result: dict[str, int] = {}
    for group in cq.resource_groups:
        for resource in group.covered:
            best = 0
            for flavor in group.flavors:
                fr = (flavor, resource)
                most = root.subtree_quota.get(fr, 0)
                walker: Node | None = node
                while walker is not None and walker is not root:
                    quota = walker.quotas.get(fr)
                    if quota is not None and quota.borrowing_limit is not None:
                        most = min(most, walker.subtree_quota.get(fr, 0) + quota.borrowing_limit)
                    walker = walker.parent
                best = max(best, most)
            result[resource] = best
    return result
