"""`make bench-cluster`: upstream's scheduler-performance shape against a real API server and `pykueue controller`.

    etcd + kube-apiserver (tests/kube/controlplane.py, as the tests start them)
      ▲ Workloads created on the generator's schedule          ▲ list/watch, admission, status
      │ marked Finished <runtime> after each (last) admission   │
    this runner (asyncio, one watch of all Workloads)     pykueue controller (a subprocess)

The shape is ../shared/bench/kueue-scheduler-perf/baseline/generator.yaml, read with
`pykueue.sim.generator` (the simulator's parser, upstream's naming): 5 cohorts x 6
ClusterQueues, nominal 20 / borrowing limit 100 CPUs, per queue 350 small, 100 medium and
50 large Workloads. Like upstream's runner, Workloads are created directly (no Jobs, no
pods) and this runner plays the job: ``runtimeMs`` after a Workload's admission it writes
``Finished=True``; an eviction cancels that, a re-admission starts it again.

Figures, as upstream's recorder defines them (docs/simulator.md, "checker"):

* wall: from the first creation to the last Finished;
* time to admission per class: creation to the *last* admission, averaged (both seen
  by this runner: the creation when its request goes out, the admission when its watch
  delivers it, so API latency counts against us); ``time_to_admission_by_timestamps_s``
  is upstream's recorder's own measure, creationTimestamp to the Admitted condition's
  lastTransitionTime (whole seconds, written by the API server and the controller);
* usage per ClusterQueue class, as upstream's recorder and checker compute it: each
  ClusterQueue's ``status.flavorsUsage`` CPU, as its watch delivers it, integrated over
  time and summed over the class / (sum of the class's nominal quotas x the time from
  the first creation to the class's last status change); the minimum over classes is
  reported. ``runner_usage_pct`` is a stricter second view: the CPUs of the Workloads
  this runner sees admitted and not yet Finished, integrated the same way (it leaves
  out the controller's lag in releasing quota, which the status-based figure counts).

``--scale`` multiplies every workload count (0.2: a fifth of the work), for a reduced run
on a small machine; such figures are labelled as reduced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pykueue.api import crd, manifests, quantity
from pykueue.api.cluster_queue import ClusterQueue, ResourceQuota
from pykueue.cli import controller_command
from pykueue.errors import AlreadyExists, Conflict, NotFound, StoreError
from pykueue.sim import generator
from pykueue.store import kubernetes

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ROOT.parent / "shared/bench/kueue-scheduler-perf"
GENERATOR = SHAPES / "baseline/generator.yaml"
UPSTREAM = {"wall_s": 351.0, "usage_pct": 55.9, "large_s": 16.5, "medium_s": 76.8, "small_s": 215.5}


@dataclass
class Tracked:
    job_class: str
    cq_class: str
    cq: str
    cpu: float
    runtime: float
    created: float = 0.0
    admitted: float | None = None  # last admission
    # Upstream's own measure: creationTimestamp to the Admitted condition's lastTransitionTime.
    stamped: float | None = None
    holding: bool = False
    finished: bool = False
    timer: asyncio.Task[None] | None = None


@dataclass
class Usage:
    """Admitted CPUs of one ClusterQueue class, integrated over time."""

    nominal: float
    now: float = 0.0
    area: float = 0.0
    last_change: float = 0.0

    def change(self, at: float, delta: float) -> None:
        self.area += self.now * (at - self.last_change)
        self.now += delta
        self.last_change = at


@dataclass
class Runner:
    store: kubernetes.KubernetesStore
    gen: generator.Generated
    scale: float
    tracked: dict[str, Tracked] = field(default_factory=dict)
    usage: dict[str, Usage] = field(default_factory=dict)
    finished: int = 0
    start: float = 0.0
    last_finish: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    # ClusterQueue name -> its class's status-based usage integral, as upstream records it.
    cq_usage: dict[str, Usage] = field(default_factory=dict)
    status_usage: dict[str, float] = field(default_factory=dict)
    status_last_change: dict[str, float] = field(default_factory=dict)

    def clock(self) -> float:
        return time.monotonic() - self.start

    def jobs(self) -> list[Any]:
        if self.scale >= 1:
            return list(self.gen.jobs)
        # Keep the first fraction of each workload set (the same pace, fewer rounds).
        kept: list[Any] = []
        seen: dict[tuple[str, str], int] = {}
        totals: dict[tuple[str, str], int] = {}
        for job in self.gen.jobs:
            totals[(job.namespace, job.where)] = totals.get((job.namespace, job.where), 0) + 1
        for job in self.gen.jobs:
            key = (job.namespace, job.where)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= max(1, round(totals[key] * self.scale)):
                kept.append(job)
        return kept

    async def create(self, job: Any, semaphore: asyncio.Semaphore) -> None:
        cpu = job.total_requests()["cpu"] / 1000
        key = f"{job.namespace}/{job.name}"
        self.tracked[key] = Tracked(
            job.job_class, self.gen.cq_classes[job.namespace], job.namespace, cpu, job.runtime / 1e6
        )
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": job.name, "namespace": job.namespace},
            "spec": {
                "queueName": job.queue,
                "priority": job.priority,
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "registry.invalid/pause",
                                        "resources": {"requests": {"cpu": f"{cpu:g}"}},
                                    }
                                ],
                            }
                        },
                    }
                ],
            },
        }
        async with semaphore:
            self.tracked[key].created = self.clock()
            await self.store.create(body)

    async def create_all(self) -> None:
        semaphore = asyncio.Semaphore(64)
        tasks = []
        for job in self.jobs():
            delay = job.submit / 1e6 - self.clock()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self.create(job, semaphore)))
        await asyncio.gather(*tasks)

    def on_event(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        wl = self.tracked.get(key)
        if wl is None or wl.finished:
            return
        self.latest[key] = obj
        conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
        now = self.clock()
        usage = self.usage.setdefault(wl.cq_class, Usage(nominal=0.0))
        if conditions.get("Finished") == "True":
            wl.finished = True
            if wl.holding:
                usage.change(now, -wl.cpu)
                wl.holding = False
            self.finished += 1
            self.last_finish = now
            if self.finished == len(self.tracked) and self.creation_done:
                self.done.set()
            return
        admitted = conditions.get("Admitted") == "True" and bool((obj.get("status") or {}).get("admission"))
        if admitted and not wl.holding:
            wl.holding = True
            wl.admitted = now
            wl.stamped = _stamped_wait(obj)
            usage.change(now, wl.cpu)
            wl.timer = asyncio.create_task(self.finish_later(key, wl))
        elif not admitted and wl.holding:
            wl.holding = False
            usage.change(now, -wl.cpu)
            if wl.timer is not None:
                wl.timer.cancel()

    creation_done: bool = False

    async def finish_later(self, key: str, wl: Tracked) -> None:
        await asyncio.sleep(wl.runtime)
        namespace, name = key.split("/")
        while True:
            obj = self.latest[key]
            status = dict(obj.get("status") or {})
            status["conditions"] = [
                *(status.get("conditions") or []),
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": "ByTest",
                    "message": "By test runner",
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
            ]
            try:
                await self.store.update_status({**obj, "status": status})
                return
            except Conflict:
                self.latest[key] = await self.store.get("Workload", namespace, name)
                if not wl.holding:
                    return
            except NotFound:
                return

    async def follow(self, kind: str, since: str, handle: Callable[[dict[str, Any]], None]) -> None:
        while True:
            with contextlib.suppress(StoreError):
                async for event in self.store.watch(kind, since):
                    since = event.resource_version
                    if event.type != "DELETED":
                        handle(event.object)

    def on_queue(self, obj: dict[str, Any]) -> None:
        """Integrate a ClusterQueue's reported CPU usage, as upstream's recorder does."""
        name = obj["metadata"]["name"]
        usage = self.cq_usage.setdefault(name, Usage(nominal=0.0, last_change=self.clock()))
        cpu = 0.0
        for flavor in (obj.get("status") or {}).get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == "cpu":
                    cpu += quantity.parse(str(resource.get("total", "0"))) / 1000
        if cpu != usage.now:
            now = self.clock()
            usage.change(now, cpu - usage.now)
            cq_class = self.gen.cq_classes.get(name, name)
            self.status_last_change[cq_class] = max(self.status_last_change.get(cq_class, 0.0), now)

    def report(self) -> dict[str, Any]:
        wall = self.last_finish
        per_class: dict[str, list[float]] = {}
        stamped: dict[str, list[float]] = {}
        for wl in self.tracked.values():
            if wl.admitted is not None:
                per_class.setdefault(wl.job_class, []).append(wl.admitted - wl.created)
            if wl.stamped is not None:
                stamped.setdefault(wl.job_class, []).append(wl.stamped)
        runner_usage = {}
        for cq_class, use in self.usage.items():
            nominal = self._class_nominal(cq_class)
            runner_usage[cq_class] = (
                round(100 * use.area / (nominal * use.last_change), 1) if use.last_change else 0.0
            )
        usage = {}
        for cq_class, until in self.status_last_change.items():
            area = sum(
                use.area
                for name, use in self.cq_usage.items()
                if self.gen.cq_classes.get(name, name) == cq_class
            )
            usage[cq_class] = round(100 * area / (self._class_nominal(cq_class) * until), 1) if until else 0.0
        return {
            "workloads": len(self.tracked),
            "finished": self.finished,
            "wall_s": round(wall, 1),
            "time_to_admission_s": {k: round(sum(v) / len(v), 1) for k, v in sorted(per_class.items())},
            "time_to_admission_by_timestamps_s": {
                k: round(sum(v) / len(v), 1) for k, v in sorted(stamped.items())
            },
            "usage_pct": usage,
            "min_usage_pct": min(usage.values()) if usage else 0.0,
            "runner_usage_pct": runner_usage,
        }

    def _class_nominal(self, cq_class: str) -> float:
        return sum(
            q.nominal_milli / 1000
            for name, klass in self.gen.cq_classes.items()
            if klass == cq_class
            for q in self._quotas(name)
        )

    def _quotas(self, cq_name: str) -> list[ResourceQuota]:
        for obj in self.gen.objects:
            if isinstance(obj, ClusterQueue) and obj.metadata.name == cq_name:
                return [r for g in obj.spec.resource_groups for f in g.flavors for r in f.resources]
        return []


async def setup(store: kubernetes.KubernetesStore, gen: generator.Generated) -> None:
    await controller_command.apply_all(store, crd.crds())


async def create_queues(store: kubernetes.KubernetesStore, gen: generator.Generated) -> None:
    for obj in gen.objects:
        doc = manifests.to_manifest(obj)
        for _ in range(50):
            try:
                await store.create(doc)
                break
            except NotFound:
                await asyncio.sleep(0.2)  # a CRD not served yet, or the namespace a moment late
            except AlreadyExists:
                break


async def run(
    kubeconfig: Path,
    gen: generator.Generated,
    scale: float,
    log_path: Path,
    qps: float,
    min_pass: float,
    metrics_port: int,
    extra_args: list[str] | None = None,
    profile: Path | None = None,
    warm_up: float = 0.0,
) -> dict[str, Any]:
    store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(kubeconfig), request_timeout_seconds=60)
    await setup(store, gen)
    if not warm_up:
        await create_queues(store, gen)
    pykueue = str(Path(sys.executable).parent / "pykueue")
    # Under cProfile the controller writes its profile when SIGTERM ends it (it stops cleanly).
    profiler = [sys.executable, "-m", "cProfile", "-o", str(profile)] if profile is not None else []
    with log_path.open("w") as log:
        controller = subprocess.Popen(
            [
                *profiler,
                pykueue,
                "controller",
                "--kubeconfig",
                str(kubeconfig),
                "--resync-seconds",
                "0.1",
                "--min-pass-seconds",
                str(min_pass),
                "--metrics-port",
                str(metrics_port),
                "--metrics-host",
                "127.0.0.1",
                "--qps",
                str(qps),
                "--log-level",
                "WARNING",
                *(extra_args or []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        if warm_up:
            # As upstream_bench --warm-up: the controller runs first and sees the queues arrive.
            await asyncio.sleep(warm_up)
            await create_queues(store, gen)
        else:
            await asyncio.sleep(3)  # the controller lists the queues
        runner = Runner(store, gen, scale)
        _, version = await store.list("Workload")
        queues, queue_version = await store.list("ClusterQueue")
        runner.start = time.monotonic()
        for queue in queues:
            runner.on_queue(queue)
        follower = asyncio.create_task(runner.follow("Workload", version, runner.on_event))
        queue_follower = asyncio.create_task(runner.follow("ClusterQueue", queue_version, runner.on_queue))
        await runner.create_all()
        runner.creation_done = True
        if runner.finished == len(runner.tracked):
            runner.done.set()
        print(f"created {len(runner.tracked)} workloads in {runner.clock():.1f}s", flush=True)
        while not runner.done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(runner.done.wait(), 10)
            print(f"  t={runner.clock():.0f}s finished {runner.finished}/{len(runner.tracked)}", flush=True)
            if controller.poll() is not None:
                raise RuntimeError(f"the controller exited; see {log_path}")
        follower.cancel()
        queue_follower.cancel()
        result = runner.report()
        result["cpu_s"] = {"controller": round(cpu_seconds(controller.pid), 1)}
        result["controller_counters"] = controller_counters(metrics_port)
        return result
    finally:
        controller.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            controller.wait(20)
        await store.close()


def _stamped_wait(obj: dict[str, Any]) -> float | None:
    """Seconds from creationTimestamp to the Admitted condition's transition (whole seconds)."""
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Admitted" and cond.get("status") == "True" and created:
            return _epoch(cond["lastTransitionTime"]) - _epoch(created)
    return None


def _epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


REQUEST_LINE = re.compile(
    r'^apiserver_request_total\{code="(?P<code>\d+)".*group="kueue\.x-k8s\.io".*'
    r'resource="(?P<resource>[a-z]+)".*subresource="(?P<sub>[a-z]*)".*verb="(?P<verb>[A-Z]+)".*\} (?P<n>\d+)$'
)


def kueue_requests(metrics: str) -> dict[str, int]:
    """Requests the API server served for Kueue kinds, by verb, resource and answer code."""
    counts: dict[str, int] = {}
    for line in metrics.splitlines():
        match = REQUEST_LINE.match(line)
        if match and match["verb"] not in ("WATCH", "LIST", "GET"):
            what = f"{match['verb']} {match['resource']}{'/' + match['sub'] if match['sub'] else ''}"
            key = f"{what} {match['code']}"
            counts[key] = counts.get(key, 0) + int(match["n"])
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


# Call counts that compare two commits on the same shape whatever the machine's load: the passes and
# cycles, what each Workload event and status costs, and the preemption target searches that grow
# with the evictions (issue 46).
PROFILED = (
    ("manager.py", "reconcile"),
    ("scheduler.py", "run_cycle"),
    ("admission.py", "handle"),
    ("admission.py", "_apply"),
    ("workload_status.py", "desired_status"),
    ("preemption.py", "_classical"),
    ("queueing.py", "pop"),
)


def profile_calls(path: Path) -> dict[str, int]:
    """The calls of `PROFILED` in the controller's cProfile output."""
    import pstats  # only for --profile

    calls: dict[str, int] = {}
    for (filename, _, function), (_, total, *_) in pstats.Stats(str(path)).stats.items():  # type: ignore[attr-defined]
        for module, name in PROFILED:
            if function == name and filename.endswith(f"/{module}"):
                key = f"{module}:{name}"
                calls[key] = calls.get(key, 0) + total
    return calls


def writes_per_workload(writes: dict[str, int], workloads: int) -> dict[str, float]:
    """Workload writes per Workload by verb and subresource (all answers; the runner's own
    creations and Finished writes included), the figure that shows a write added per workload."""
    per: dict[str, float] = {}
    for key, count in writes.items():
        what = key.rsplit(" ", 1)[0]
        if " workloads" in what:
            per[what] = per.get(what, 0.0) + count
    return {what: round(count / max(1, workloads), 2) for what, count in sorted(per.items())}


COUNTERS = (
    "kueue_admitted_workloads_total",
    "kueue_evicted_workloads_total",
    "kueue_preempted_workloads_total",
)


def controller_counters(port: int) -> dict[str, float]:
    """Admissions, evictions and preemptions, summed over labels, from the controller's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    totals = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            totals[name] += float(line.rsplit(" ", 1)[1])
    return totals


def machine() -> str:
    cpus = os.cpu_count()
    load = os.getloadavg()
    return f"{cpus} CPUs, load average {load[0]:.1f} at the end"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each workload set (1 = full)")
    parser.add_argument("--generator", type=Path, default=GENERATOR)
    parser.add_argument(
        "--shape",
        choices=("baseline", "large-scale"),
        help="upstream's shape of this name (instead of --generator)",
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=0.0,
        help="start the controller this many seconds before the queues are created (upstream_bench's "
        "--warm-up); 0: the queues exist when it starts",
    )
    parser.add_argument(
        "--max-status-writes-per-workload",
        type=float,
        help="fail when the successful Workload status writes per Workload exceed this",
    )
    parser.add_argument(
        "--profile", type=Path, help="run the controller under cProfile and write its profile here"
    )
    parser.add_argument("--qps", type=float, default=0.0, help="the controller's --qps (0: unlimited)")
    parser.add_argument(
        "--min-pass-seconds", type=float, default=0.1, help="the controller's --min-pass-seconds"
    )
    parser.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="one more argument for `pykueue controller` (repeat; e.g. --controller-arg=--upstream-cycle)",
    )
    parser.add_argument(
        "--profile-apiserver",
        action="store_true",
        help="serve the apiserver's /debug/pprof (read it with kubectl get --raw while the run goes)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.kube.controlplane import KubeCluster, find_bin_dir, free_ports  # the tests' control plane

    gen = generator.load(SHAPES / args.shape / "generator.yaml" if args.shape else args.generator)
    with tempfile.TemporaryDirectory(prefix="pykueue-bench-") as tmp:
        cluster = KubeCluster(find_bin_dir(), Path(tmp))
        try:
            cluster.start_apiserver(profiling=args.profile_apiserver)
            began = time.monotonic()
            result = asyncio.run(
                run(
                    cluster.kubeconfig,
                    gen,
                    args.scale,
                    Path(tmp) / "controller.log",
                    args.qps,
                    args.min_pass_seconds,
                    free_ports(1)[0],
                    args.controller_arg,
                    args.profile,
                    args.warm_up,
                )
            )
            result["total_s"] = round(time.monotonic() - began, 1)
            for name in ("kube-apiserver", "etcd"):
                result["cpu_s"][name] = round(cpu_seconds(cluster.processes[name].pid), 1)
            result["cpu_s"]["runner"] = round(time.process_time(), 1)
            result["kueue_writes"] = kueue_requests(cluster.request("GET", "/metrics", raw=True))
            result["writes_per_workload"] = writes_per_workload(result["kueue_writes"], result["workloads"])
            # The steadiest figure: the runner's Finished and the controller's admission make 2.0,
            # whatever the evictions (an eviction mostly takes back an admission not yet written).
            result["status_writes_per_workload"] = round(
                result["kueue_writes"].get("PUT workloads/status 200", 0) / max(1, result["workloads"]), 2
            )
        finally:
            cluster.stop()
    if args.profile is not None and args.profile.exists():
        result["profile_calls"] = profile_calls(args.profile)
    result["scale"] = args.scale
    result["machine"] = machine()
    result["upstream"] = UPSTREAM
    print(json.dumps(result, indent=2))
    if result["finished"] != result["workloads"]:
        return 1
    limit = args.max_status_writes_per_workload
    if limit is not None and result["status_writes_per_workload"] > limit:
        print(
            f"status_writes_per_workload {result['status_writes_per_workload']} is above {limit}: "
            "the controller writes Workload statuses more often than it did (docs/performance.md, issue 46)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
