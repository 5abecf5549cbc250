"""A quota design: the queue objects one simulation runs on, and whether every job can run there.

A design is a list of manifests (ResourceFlavors, ClusterQueues, Cohorts,
LocalQueues, Namespaces, priority classes) read from YAML or made by the
generator. `Design.state` builds a fresh engine state from them for each run,
so two runs never share anything.

A design file may also hold upstream Kueue's ``Configuration``
(``config.kueue.x-k8s.io/v1beta1`` or ``v1beta2``), read by the same parser as
the controller's ``--config`` (`pykueue.reconcilers.kueue_configuration`): its
``fairSharing``, ``admissionFairSharing`` and ``featureGates`` change how the
design schedules. What the simulator does not model (``waitForPodsReady``,
upstream's non-engine sections) and fair-sharing weights that have no effect
because fair sharing is off become `Design.notes`, shown with the results.

`Design.check` refuses a trace that could never finish, before any time is
simulated, naming the trace line: a job whose LocalQueue does not exist (or
points at a missing ClusterQueue), whose priority class is unknown, that
requests a resource its ClusterQueue does not cover, or that is larger than
everything its ClusterQueue could ever get (its nominal quota plus what it
may borrow, capped by the whole cohort tree).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pykueue.api import configuration, manifests, quantity
from pykueue.api.manifests import KubeObject
from pykueue.engine import feasibility, loading
from pykueue.engine.cohort_tree import Node
from pykueue.engine.config import EngineConfig
from pykueue.engine.state import State
from pykueue.errors import InputError
from pykueue.reconcilers import kueue_configuration
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
# A manager's MultiKueue objects: read by `pykueue.sim.federation`, ignored by the engine.
MULTIKUEUE_KINDS = frozenset({"MultiKueueConfig", "MultiKueueCluster"})


class Workers(Protocol):
    """What a design needs of its workers (`pykueue.sim.federation.Federation` has it)."""

    @property
    def workers(self) -> Mapping[str, Design]:
        """The worker designs, by MultiKueueCluster name."""
        ...

    def check(self, manager: State, jobs: list[Job]) -> list[str]:
        """The problems of ``jobs`` that only the workers can see."""
        ...


@dataclass(slots=True)
class Design:
    """The queue objects of one design, with a name to show in reports."""

    name: str
    objects: list[KubeObject]
    cq_classes: dict[str, str] = field(default_factory=dict)
    config: EngineConfig = field(default_factory=EngineConfig)
    notes: list[str] = field(default_factory=list)
    config_source: str = ""  # where the Configuration came from; empty: the simulator's defaults
    # upstream's Configuration ``multiKueue`` section, read (a manager's dispatcher)
    multikueue_section: configuration.MultiKueue = field(default_factory=configuration.MultiKueue)
    # a manager's workers, once `pykueue.sim.federation.attach` gave it some
    federation: Workers | None = None

    @classmethod
    def load(cls, path: Path, name: str | None = None) -> Design:
        found: list[tuple[str, Any]] = []

        def take(doc: Any, where: str) -> bool:
            if isinstance(doc, dict) and doc.get("kind") == "Configuration":
                found.append((where, doc))
                return True
            return False

        objects = manifests.load_paths([path], manifests.RELAXED, take)
        if len(found) > 1:
            raise InputError(
                f"{path}: a design holds one Configuration; found {len(found)} "
                f"({', '.join(where for where, _ in found)})"
            )
        others = sorted({obj.kind for obj in objects if obj.kind not in QUEUE_KINDS | MULTIKUEUE_KINDS})
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
        design = cls(name or path.stem, objects, classes)
        if found:
            design.configure(*found[0])
        design.notes.extend(design.weight_notes())
        return design

    def configure(self, where: str, doc: Any) -> None:
        """Take upstream's Configuration ``doc``: the engine's sections, notes for the rest."""
        # pykueue.nominalFirst unless given: the simulator's default, as the controller's and
        # standalone's (a Configuration describes upstream's settings, not pykueue's own)
        loaded = kueue_configuration.parse(doc, where)
        config = loaded.engine
        if config.wait_for_pods_ready is not None:
            config = dataclasses.replace(config, wait_for_pods_ready=None)
            self.notes.append(
                f"{where}: waitForPodsReady is not simulated (pods are ready at admission); ignored"
            )
        unused = sorted((*loaded.unused, *loaded.job_sections))
        if "multiKueue" in unused and any(obj.kind in MULTIKUEUE_KINDS for obj in self.objects):
            # a manager's dispatcher: `pykueue.sim.federation` reads it
            self.multikueue_section = loaded.configuration.multi_kueue
            unused = [name for name in unused if name != "multiKueue"]
        if unused:
            self.notes.append(f"{where}: not used by the simulator: {', '.join(unused)}")
        self.config = config
        self.config_source = where

    def weight_notes(self) -> list[str]:
        """Fair-sharing weights that change nothing because the feature that reads them is off."""
        notes = []
        weighted = []
        for obj in self.objects:
            if obj.kind in ("ClusterQueue", "Cohort"):
                fair = getattr(obj.spec, "fair_sharing", None)
                if fair is not None and fair.weight is not None:
                    weighted.append(f"{obj.kind} {obj.metadata.name}")
        if weighted and not self.config.fair_sharing.enable:
            shown = ", ".join(weighted[:5]) + (f" and {len(weighted) - 5} more" if len(weighted) > 5 else "")
            notes.append(
                f"fairSharing weights are set ({shown}) but fair sharing is off in design {self.name}: "
                "they change nothing (add a Configuration with fairSharing: {enable: true})"
            )
        lq_weighted = []
        for obj in self.objects:
            fair = getattr(obj.spec, "fair_sharing", None) if obj.kind == "LocalQueue" else None
            if fair is not None and fair.weight is not None:
                lq_weighted.append(f"{obj.metadata.namespace}/{obj.metadata.name}")
        if lq_weighted and self.config.admission_fair_sharing is None:
            shown = ", ".join(lq_weighted[:5]) + (
                f" and {len(lq_weighted) - 5} more" if len(lq_weighted) > 5 else ""
            )
            notes.append(
                f"LocalQueue fairSharing weights are set ({shown}) but admission fair sharing is off in "
                f"design {self.name}: they change nothing (add a Configuration with admissionFairSharing)"
            )
        return notes

    @property
    def fair_sharing(self) -> bool:
        return self.config.fair_sharing.enable

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
                self.place(state, job, limits)
            except JobProblem as problem:
                problems.append(f"{job.where} {problem.field}: {problem}")
                continue
            result.append(job)
        if self.federation is not None:
            problems.extend(self.federation.check(state, result))
        if problems:
            raise TraceError(problems)
        for note in borrowing_notes(state, result):
            if note not in self.notes:
                self.notes.append(note)
        return result

    @classmethod
    def place(cls, state: State, job: Job, limits: dict[str, dict[str, int]]) -> str:
        """The ClusterQueue ``job`` goes to in ``state``; JobProblem if it has none or never fits."""
        cq = cls._cluster_queue(state, job)
        cls._check_size(state, job, cq, limits)
        return cq

    @staticmethod
    def _resolve_priority(state: State, job: Job) -> Job:
        if not job.priority_class:
            return job
        for kind in ("WorkloadPriorityClass", "PriorityClass"):
            value = state.priority_values.get((kind, job.priority_class))
            if value is not None:
                return dataclasses.replace(job, priority=value)
        known = sorted(name for _, name in state.priority_values)
        raise JobProblem(
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
            raise JobProblem("queue", f"LocalQueue {job.queue_key} is not in the design (known: {shown})")
        if lq.cluster_queue not in state.cluster_queues:
            raise JobProblem(
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
                raise JobProblem(
                    "requests", f"requests {resource}, which ClusterQueue {cq_name} does not cover"
                )
            if need > ceiling[resource]:
                raise JobProblem(
                    "requests",
                    f"needs {quantity.format_milli(need)} {resource} but {where} can give ClusterQueue "
                    f"{cq_name} at most {quantity.format_milli(ceiling[resource])}: the job could never start",
                )


def borrowing_notes(state: State, jobs: Iterable[Job]) -> list[str]:
    """Per ClusterQueue, the jobs that can run only on other queues' idle quota (engine/feasibility.py):
    they wait for as long as the others keep their own quota busy, and no priority of theirs helps."""
    found: dict[str, list[tuple[int, str, str]]] = {}
    seen: dict[tuple[object, ...], feasibility.Verdict | None] = {}  # a trace repeats a few shapes
    for job in jobs:
        lq = state.local_queues.get(job.queue_key)
        if lq is None or lq.cluster_queue not in state.nodes:
            continue
        cq = state.cluster_queues[lq.cluster_queue]
        shape = (
            cq.name,
            tuple(sorted(job.total_requests().items())),
            job.total_requests(minimum=True) != job.total_requests(),
        )
        if shape not in seen:
            seen[shape] = feasibility.analyse(cq, state.nodes[cq.name], job.workload(""), design=True)
        verdict = seen[shape]
        if verdict is not None and verdict.kind == feasibility.BEYOND_NOMINAL:
            found.setdefault(cq.name, []).append(
                (verdict.needed - verdict.nominal, job.key, verdict.sentence)
            )
    notes = []
    for name in sorted(found):
        items = found[name]
        _, key, sentence = max(items, key=lambda item: (item[0], item[1]))
        notes.append(
            f"ClusterQueue {name}: {len(items)} job(s) need more than its nominal quota and run only on "
            f"quota the other queues leave idle; the largest, {key}: {sentence}"
        )
    return notes


class JobProblem(Exception):
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
