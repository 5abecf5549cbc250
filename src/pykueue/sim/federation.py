"""Several clusters behind one MultiKueue: a manager design and a worker design per MultiKueueCluster.

The manager's design is an ordinary design (`pykueue.sim.design.Design`) that
also holds upstream's MultiKueue objects: ``MultiKueueCluster``\\ s (the
workers), ``MultiKueueConfig``\\ s (which workers, in which order) and an
``AdmissionCheck`` of controller ``kueue.x-k8s.io/multikueue`` named by the
ClusterQueues whose jobs go to the workers. Each worker's queues are a design
of their own, given on the command line as ``--cluster NAME=PATH``, NAME being
the MultiKueueCluster's name. `attach` ties them together and checks that
they fit, naming the object and field of every problem:

* a MultiKueueCluster without a worker design, a ``--cluster`` naming no
  MultiKueueCluster;
* a MultiKueueConfig listing a cluster that is not there, a MultiKueue
  AdmissionCheck whose parameters name no MultiKueueConfig of the design, a
  ClusterQueue naming two of them;
* a worker design with MultiKueue objects of its own (one level only);
* a dispatcher the simulator cannot model (an external one).

`Federation.check` adds the trace's side: every worker a job may go to needs
the job's LocalQueue, and at least one of them must be able to hold the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER, AdmissionCheck
from pykueue.api.multikueue import MultiKueueConfig
from pykueue.engine import intake
from pykueue.engine.state import State
from pykueue.errors import InputError
from pykueue.sim import dispatch, trace
from pykueue.sim.design import MULTIKUEUE_KINDS, Design, JobProblem
from pykueue.sim.jobs import SECOND, Job

CONFIG_KIND = "MultiKueueConfig"
WORKER_LOST_TIMEOUT = 15 * 60 * SECOND  # upstream's default


@dataclass(slots=True)
class Federation:
    """A manager's workers and how its MultiKueue checks reach them."""

    workers: dict[str, Design]  # by MultiKueueCluster name
    # per MultiKueue AdmissionCheck, its MultiKueueConfig's clusters in the config's order
    checks: dict[str, tuple[str, ...]]
    dispatcher: dispatch.Dispatcher = dispatch.ALL_AT_ONCE
    # how long a job stays with a worker the manager cannot reach before it is dispatched again
    worker_lost_timeout: int = WORKER_LOST_TIMEOUT
    notes: list[str] = field(default_factory=list)

    def clusters_of(self, state: State, cq_name: str) -> tuple[str, ...]:
        """The workers a job of the manager's ClusterQueue ``cq_name`` may go to (none: it runs on the manager)."""
        cq = state.cluster_queues.get(cq_name)
        if cq is None:
            return ()
        for check in cq.admission_checks:
            if check in self.checks:
                return self.checks[check]
        return ()

    def check(self, manager: State, jobs: list[Job]) -> list[str]:
        """Problems of jobs that could not run on the workers they would be sent to."""
        problems: list[str] = []
        states = {name: design.state() for name, design in self.workers.items()}
        limits: dict[str, dict[str, dict[str, int]]] = {name: {} for name in self.workers}
        for job in jobs:
            lq = manager.local_queues.get(job.queue_key)
            clusters = self.clusters_of(manager, lq.cluster_queue) if lq is not None else ()
            if clusters and job.max_execution is not None:
                problems.append(
                    f"{job.where} maxExecutionTime: not simulated for a job sent to MultiKueue workers (yet)"
                )
            fits: list[str] = []
            too_small: list[str] = []
            for name in clusters:
                try:
                    Design.place(states[name], job, limits[name])
                except JobProblem as problem:
                    if problem.field == "queue":
                        problems.append(f"{job.where} queue: worker {name}: {problem}")
                    else:
                        too_small.append(f"{name} ({problem})")
                    continue
                fits.append(name)
            if clusters and not fits and too_small:
                problems.append(f"{job.where} requests: no worker can ever run it: {'; '.join(too_small)}")
        return problems


def parse_cluster_option(text: str) -> tuple[str, Path]:
    """``NAME=PATH`` of a ``--cluster`` option."""
    name, equals, path = text.partition("=")
    if not equals or not name.strip() or not path.strip():
        raise InputError(f"--cluster {text}: expected NAME=PATH (a MultiKueueCluster's name and its queues)")
    return name.strip(), Path(path.strip())


def load_workers(options: list[str]) -> dict[str, Design]:
    """The worker designs of ``--cluster NAME=PATH`` options, in the order given."""
    workers: dict[str, Design] = {}
    for text in options:
        name, path = parse_cluster_option(text)
        if name in workers:
            raise InputError(f"--cluster {text}: cluster {name} is given twice")
        worker = Design.load(path, name)
        nested = sorted({obj.kind for obj in worker.objects if obj.kind in MULTIKUEUE_KINDS})
        if nested:
            raise InputError(
                f"{path}: worker {name} holds {', '.join(nested)}: a worker cannot be a MultiKueue manager "
                "in the simulator (one level of clusters only)"
            )
        workers[name] = worker
    return workers


def attach(manager: Design, pool: Mapping[str, Design], strict: bool = True) -> None:
    """Give ``manager`` the workers its MultiKueueClusters name, out of ``pool``.

    ``strict``: every worker of the pool must be one of this design's clusters
    (`pykueue simulate`); `pykueue plan` passes one pool to every design, each taking
    its own clusters.
    """
    clusters = [obj.metadata.name for obj in manager.objects if obj.kind == "MultiKueueCluster"]
    if not clusters:
        if pool and strict:
            raise InputError(
                f"--cluster {', '.join(pool)}: design {manager.name} has no MultiKueueCluster "
                "(a manager design lists its workers as MultiKueueClusters)"
            )
        return
    missing = [name for name in clusters if name not in pool]
    if missing:
        raise InputError(
            f"design {manager.name}: MultiKueueCluster {', '.join(missing)} has no worker design: "
            f"give --cluster {missing[0]}=FOLDER (the worker's queues)"
        )
    if strict:
        unknown = [name for name in pool if name not in clusters]
        if unknown:
            raise InputError(
                f"--cluster {unknown[0]}: design {manager.name} has no MultiKueueCluster {unknown[0]} "
                f"(it has: {', '.join(clusters)})"
            )
    configs = _configs(manager, set(clusters))
    checks = _checks(manager, configs)
    _one_check_per_queue(manager, checks)
    used = sorted({name for order in checks.values() for name in order})
    notes = []
    idle = [name for name in clusters if name not in used]
    if idle:
        notes.append(
            f"design {manager.name}: MultiKueueCluster {', '.join(idle)} is in no MultiKueueConfig "
            "of a MultiKueue AdmissionCheck: it gets no jobs"
        )
    manager.federation = Federation(
        {name: pool[name] for name in clusters},
        checks,
        _dispatcher(manager),
        _worker_lost_timeout(manager),
        notes,
    )
    manager.notes.extend(notes)


def _configs(manager: Design, clusters: set[str]) -> dict[str, tuple[str, ...]]:
    configs: dict[str, tuple[str, ...]] = {}
    for obj in manager.objects:
        if obj.kind != CONFIG_KIND:
            continue
        assert isinstance(obj, MultiKueueConfig)
        for position, name in enumerate(obj.spec.clusters):
            if name not in clusters:
                raise InputError(
                    f"design {manager.name}: MultiKueueConfig {obj.metadata.name} spec.clusters[{position}]: "
                    f"no MultiKueueCluster {name} in the design (it has: {', '.join(sorted(clusters))})"
                )
        configs[obj.metadata.name] = tuple(obj.spec.clusters)
    return configs


def _checks(manager: Design, configs: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    checks: dict[str, tuple[str, ...]] = {}
    for obj in manager.objects:
        if obj.kind != "AdmissionCheck":
            continue
        assert isinstance(obj, AdmissionCheck)
        if obj.spec.controller_name != MULTIKUEUE_CONTROLLER:
            continue
        params = obj.spec.parameters
        where = f"design {manager.name}: AdmissionCheck {obj.metadata.name} spec.parameters"
        if params is None or params.api_group != "kueue.x-k8s.io" or params.kind != CONFIG_KIND:
            raise InputError(f"{where}: must name a kueue.x-k8s.io MultiKueueConfig")
        if params.name not in configs:
            known = ", ".join(sorted(configs)) or "none"
            raise InputError(f"{where}: no MultiKueueConfig {params.name} in the design (it has: {known})")
        checks[obj.metadata.name] = configs[params.name]
    return checks


def _one_check_per_queue(manager: Design, checks: Mapping[str, tuple[str, ...]]) -> None:
    state = manager.state()
    for cq in state.cluster_queues.values():
        named = [check for check in cq.admission_checks if check in checks]
        if len(named) > 1:
            raise InputError(
                f"design {manager.name}: ClusterQueue {cq.name} spec.admissionChecksStrategy: names "
                f"{len(named)} MultiKueue AdmissionChecks ({', '.join(named)}); one at most"
            )


def _dispatcher(manager: Design) -> dispatch.Dispatcher:
    name = manager.multikueue_section.dispatcher_name
    if name is None:
        return dispatch.ALL_AT_ONCE
    found = dispatch.DISPATCHER_NAMES.get(str(name))
    if found is None:
        raise InputError(
            f"{manager.config_source}: multiKueue.dispatcherName: {name} is an external dispatcher, which "
            f"the simulator cannot model (use one of {', '.join(dispatch.DISPATCHER_NAMES)})"
        )
    return found


def _worker_lost_timeout(manager: Design) -> int:
    text = manager.multikueue_section.worker_lost_timeout
    if text is None:
        return WORKER_LOST_TIMEOUT
    return intake.parse_duration(text)  # checked by `pykueue.api.configuration`


def parse_outage(text: str) -> tuple[str, int, int]:
    """``NAME=START..END`` of an ``--outage`` option: a worker the manager cannot reach in [START, END)."""
    name, equals, window = text.partition("=")
    start_text, dots, end_text = window.partition("..")
    if not equals or not dots or not name.strip():
        raise InputError(f"--outage {text}: expected NAME=START..END (a worker, and times like 30m..2h)")
    try:
        start = trace.duration(start_text.strip(), "START")
        end = trace.duration(end_text.strip(), "END")
    except trace.FieldProblem as problem:
        raise InputError(f"--outage {text}: {problem.field}: {problem}") from problem
    if end <= start:
        raise InputError(f"--outage {text}: the end must come after the start")
    return name.strip(), start, end
