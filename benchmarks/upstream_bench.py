"""`make bench-upstream`: upstream Kueue's own scheduler-performance runner against both controllers.

    hack/kueue-perf-binaries: runner, minimalkueue, checker.test   (sigs.k8s.io/kueue, pinned, unchanged)
    hack/kube-binaries:       etcd, kube-apiserver                   (the runner starts them with envtest)

    for each run, for each shape:   runner --minimalKueue=<controller> ...   then   checker.test
        (a) minimalkueue: upstream's scheduler and core controllers, client 50 requests/s, burst 100 per kind
        (b) pykueue:      `pykueue controller --qps 50 --burst 100` (per kind too), started by the runner
                          exactly where it starts minimalkueue (a two-line wrapper script)

Both controllers get the same thing: upstream's runner starts a fresh etcd and kube-apiserver
(envtest, its flags, upstream's CRDs), starts the controller with ``--kubeconfig``, creates the
queues and Workloads on the generator's schedule, plays the jobs (Finished ``runtimeMs`` after
an admission; an evicted workload gets its reservation unset, as a job that stopped), records,
and stops the controller with SIGINT. The controller's wall time, CPU and peak RSS are the
runner's own record of its child process (``<name>.stats.yaml``); upstream's checker gives
the verdict against the shape's ``rangespec.yaml`` (full-scale bounds, also for ``--scale``).

Figures per run (upstream's recorder, ``summary.yaml``): wall (the controller process), usage
(each ClusterQueue's ``status.flavorsUsage`` integrated over time, the class's minimum), time
to admission per class (creation to the last admission, as the runner's watch sees them),
evictions (per the runner's watch). One more, computed from the same recorder's per-workload
record (``wlStates.csv``): *runner usage*, the CPUs of Workloads between the admission and the
Finished the runner saw, over the same time and nominal quota. It does not depend on how a
controller reports its queues' status, so it compares the two controllers on equal terms.

Two more from the bench's own watches on Workloads and ClusterQueues (upstream_watch.py, kept
in ``watch.jsonl``), computed the same way for both controllers: *lost CPU s*, each eviction's
admitted CPUs times the time since its reservation, and *usage lag*, how long each
ClusterQueue's ``status.flavorsUsage`` took to show each change of its admitted usage
(p50 / p99 / max). For pykueue, its ``pykueue_preempted_resource_seconds_total`` (read from
``--metrics-port`` on loopback, a second after evictions) is the cross-check of the first.

``--scale`` multiplies every workload count (at least one per set); ``--runs`` repeats the
whole sequence and the table shows min / median / max. Results are kept in ``--out``.

``--warm-up SECONDS`` starts each controller that long *before* the runner instead. Started by
the runner, a controller races the generator: each queue's first small Workload comes 0.1 s
after its queues, its first large one 1.2 s after, and a controller that schedules before then
admits small and medium Workloads that the large ones must preempt, by upstream's rules. A
controller in a cluster runs long before jobs arrive, so this mode compares the two as users
meet them. It needs a control plane outside the runner: etcd and kube-apiserver from
hack/kube-binaries (with the in-flight limits the runner gives its own) and upstream's CRDs;
the runner runs in its in-cluster mode (no ``--minimalKueue``) with ``KUBECONFIG`` set. The
controller is stopped with SIGINT once the runner logs that its recorder is done, as the
runner does, and its record has the runner's format: wall from the runner's start to the
controller's exit, CPU and peak RSS from the kernel's account of the process.

``--minimalkueue-args FLAGS`` starts minimalkueue through a wrapper of the same name that adds
FLAGS, e.g. ``--zap-log-level=2`` for a log line per scheduling cycle, head and admission; with
``--warm-up`` the log is kept in ``minimalkueue.out.log``. Logging costs minimalkueue time, so
such runs explain a count, they are not headline figures.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from benchmarks import upstream_watch
from benchmarks.cluster_bench import kueue_requests
from pykueue.devcluster.controlplane import KubeCluster
from pykueue.devcluster.credentials import write_kubeconfig
from pykueue.devcluster.processes import ControlPlaneError

ROOT = Path(__file__).resolve().parents[1]
SHAPES_DIR = ROOT.parent / "shared" / "bench" / "kueue-scheduler-perf"
SHAPES = ("baseline", "large-scale")
CONTROLLERS = ("minimalkueue", "pykueue")
CLASSES = ("large", "medium", "small")
# The runner's own time limit for recording, per shape at full scale (upstream's CI: 10 min and 25 min).
TIMEOUT_MINUTES = {"baseline": 20, "large-scale": 50}
CPU_OF_CLASS_LABEL = "request"

WRAPPER = """#!/bin/sh
# Started by upstream's runner where it starts minimalkueue: NAME --kubeconfig FILE [flags it may add].
kubeconfig=""
while [ $# -gt 0 ]; do
    case "$1" in
    --kubeconfig) kubeconfig="$2"; shift 2 ;;
    --kubeconfig=*) kubeconfig="${1#--kubeconfig=}"; shift ;;
    *) shift ;;
    esac
done
exec "$PYKUEUE_BIN" controller --kubeconfig "$kubeconfig" $PYKUEUE_CONTROLLER_ARGS 2>>"$PYKUEUE_LOG"
"""


@dataclass
class Run:
    controller: str
    shape: str
    scale: float
    index: int
    out: str
    # Seconds the controller ran before the runner started (0: the runner started it, with
    # the generator, as upstream's harness does).
    warm_up_s: float = 0.0
    ok: bool = False
    verdict: str = ""
    wall_s: float = 0.0
    usage_pct: float = 0.0
    runner_usage_pct: float = 0.0
    tta_s: dict[str, float] = field(default_factory=dict)
    evictions: int = 0
    cpu_s: float = 0.0
    rss_mib: float = 0.0
    workloads: int = 0
    # Workloads the runner's watch first saw already admitted (their time to admission counts
    # as 0 in its averages): its informer lists again after a watch ends early, and what was
    # created and admitted meanwhile arrives admitted. A property of the run, not of the controller.
    seen_admitted: int = 0
    # The API server's own count of Kueue writes (creates, updates, patches) by verb, resource, code.
    kueue_writes: dict[str, int] = field(default_factory=dict)
    control_plane_cpu_s: dict[str, float] = field(default_factory=dict)
    # From the bench's own watches on Workloads and ClusterQueues (upstream_watch.py); None in
    # runs recorded before they existed. Lost work: each eviction's resources x the time since
    # its reservation, in resource-seconds per "flavor/resource" (CPU: core-seconds).
    watch_evictions: int | None = None
    watch_cpu_s: float | None = None  # what the two watches cost the bench process (not the controller)
    lost_cpu_s: float | None = None
    lost_work: dict[str, float] = field(default_factory=dict)
    # pykueue only: its own pykueue_preempted_resource_seconds_total, the cross-check.
    metric_lost_cpu_s: float | None = None
    metric_lost_work: dict[str, float] = field(default_factory=dict)
    # How long status.flavorsUsage took to show each change of the usage the watch saw:
    # p50, p99, max, changes, unresolved, stale_s (seconds the status disagreed, all queues).
    status_lag_s: dict[str, float] = field(default_factory=dict)
    status_lag_by_queue: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str = ""

    @property
    def workload_status_writes(self) -> int:
        return sum(n for what, n in self.kueue_writes.items() if "workloads/status" in what)


def children_cpu(parent: int, names: tuple[str, ...]) -> dict[str, float]:
    """CPU seconds (user + system) of the direct children of ``parent`` with these names."""
    found: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            head, _, tail = (entry / "stat").read_text().rpartition(")")
        except OSError:
            continue
        name = head.partition("(")[2]
        fields = tail.split()
        if name in names and int(fields[1]) == parent:
            found[name] = (int(fields[11]) + int(fields[12])) / tick
    return found


class MetricsPoller(threading.Thread):
    """Reads the API server's /metrics every few seconds while the runner's control plane lives.

    The runner writes the control plane's admin kubeconfig into its output directory; the last
    answer before the runner stops the API server holds the run's request counts.
    """

    def __init__(self, kubeconfig: Path, every: float = 2.0, series: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.kubeconfig = kubeconfig
        self.series = series  # every answer's counts, one JSON line each
        self.runner_pid = 0
        self.cpu: dict[str, float] = {}  # CPU seconds of the runner's children (etcd, kube-apiserver)
        self.every = every
        self.last = ""
        self.stopping = threading.Event()

    def run(self) -> None:
        context: ssl.SSLContext | None = None
        server = ""
        while not self.stopping.wait(self.every if context else 0.5):
            if self.runner_pid:
                self.cpu.update(children_cpu(self.runner_pid, ("etcd", "kube-apiserver")))
            try:
                if context is None:
                    if not self.kubeconfig.exists():
                        continue
                    context, server = upstream_watch.connect(self.kubeconfig)
                with urllib.request.urlopen(server + "/metrics", context=context, timeout=10) as answer:
                    self.last = answer.read().decode()
                if self.series is not None:
                    with self.series.open("a") as f:
                        f.write(json.dumps([round(time.monotonic(), 2), kueue_requests(self.last)]) + "\n")
            except (OSError, ValueError, KeyError, ssl.SSLError):
                continue


def free_port() -> int:
    """A loopback port free now (for pykueue's /metrics; the runner's API server picks its own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bin_dir(script: str, *args: str) -> Path:
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / script), *args], check=True, capture_output=True, text=True
    )
    return Path(result.stdout.strip().splitlines()[-1])


def scaled_generator(shape: str, scale: float, dest: Path) -> Path:
    """The shape's generator.yaml with every workload count scaled (at least 1 per set)."""
    doc = yaml.safe_load((SHAPES_DIR / shape / "generator.yaml").read_text())
    if scale != 1:
        for cohort in doc["cohorts"]:
            for queues in cohort["queuesSets"]:
                for workloads in queues["workloadsSets"]:
                    workloads["count"] = max(1, round(workloads["count"] * scale))
    path = dest / "generator.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _queue_sets(doc: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each queue set of a generator document, with how many cohorts repeat it."""
    for cohort in doc["cohorts"]:
        for queues in cohort["queuesSets"]:
            yield cohort["count"], queues


def nominal_cpu(doc: dict[str, Any]) -> dict[str, float]:
    """CPUs of every ClusterQueue class, summed over its queues (the recorder's nominal quota)."""
    total: dict[str, float] = {}
    for cohorts, queues in _queue_sets(doc):
        cpus = float(queues["nominalQuota"]) * queues["count"] * cohorts
        total[queues["className"]] = total.get(queues["className"], 0.0) + cpus
    return total


def expected_workloads(doc: dict[str, Any]) -> int:
    """How many Workloads the generator creates."""
    return sum(
        cohorts * queues["count"] * sets["count"] * len(sets["workloads"])
        for cohorts, queues in _queue_sets(doc)
        for sets in queues["workloadsSets"]
    )


def workload_cpu(doc: dict[str, Any]) -> dict[str, float]:
    """CPUs of one workload of each workload class."""
    return {
        w["className"]: float(w[CPU_OF_CLASS_LABEL])
        for _, queues in _queue_sets(doc)
        for sets in queues["workloadsSets"]
        for w in sets["workloads"]
    }


def _seconds(stamp: Any) -> float:
    if isinstance(stamp, datetime):
        return stamp.timestamp()
    text = str(stamp).replace("Z", "+00:00")
    head, _, tail = text.partition(".")
    if tail:  # Go writes nanoseconds; Python reads at most microseconds
        digits = "".join(c for c in tail if c.isdigit())
        zone = tail[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(text).timestamp()


def read_figures(run: Run, generator: Path, stats_file: Path) -> None:
    out = Path(run.out)
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    stats = yaml.safe_load(stats_file.read_text())
    run.wall_s = stats["wallMs"] / 1000
    run.cpu_s = (stats["userMs"] + stats["sysMs"]) / 1000
    run.rss_mib = stats["maxrss"] / 1024  # KiB on Linux
    usages = []
    spans = {}
    for name, cq_class in (summary.get("clusterQueueClasses") or {}).items():
        span_ms = (_seconds(cq_class["lastEventTime"]) - _seconds(cq_class["firstEventTime"])) * 1000
        spans[name] = span_ms
        if cq_class["nominalQuota"] and span_ms:
            usages.append(cq_class["cpuUsed"] * 100 / (cq_class["nominalQuota"] * span_ms))
    run.usage_pct = min(usages) if usages else 0.0
    classes = summary.get("workloadClasses") or {}
    run.tta_s = {
        name: classes[name]["averageTimeToAdmissionMs"] / 1000 for name in CLASSES if name in classes
    }
    run.evictions = sum(int(c.get("totalEvictions", 0)) for c in classes.values())
    run.workloads = sum(int(c.get("count", 0)) for c in classes.values())
    # The runner's own view of running work: admitted -> finished, per workload, as its watch saw them.
    doc = yaml.safe_load(generator.read_text())
    cpus = workload_cpu(doc)
    held = 0.0
    recorded = 0
    with (out / "wlStates.csv").open() as f:
        for row in csv.DictReader(f):
            recorded += 1
            admitted_ms, finished_ms = int(row["ms to admitted"]), int(row["ms to finish"])
            held += cpus.get(row["class name"], 0.0) * max(0, finished_ms - admitted_ms)
            run.seen_admitted += admitted_ms == 0 and finished_ms > 0
    expected = expected_workloads(doc)
    if recorded < expected:
        # The recorder stops once no ClusterQueue status it saw says pending or reserving
        # after the generator is done: a controller whose busy queues have no status yet
        # then ends the run early.
        run.error = f"the runner's recorder stopped after {recorded} of {expected} Workloads; see {out / 'runner.log'}"
    nominal = sum(nominal_cpu(doc).values())
    span = max(spans.values()) if spans else 0.0
    run.runner_usage_pct = held * 100 / (nominal * span) if nominal and span else 0.0


def kill_session(sid: int) -> None:
    """Kill every process left in the runner's session.

    Upstream's test environment starts etcd and kube-apiserver each in a process group of
    its own (so killing the runner's group misses them), but in the runner's session: a
    runner that ends on its deadline would otherwise leave them loading the next run.
    """
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid pgrp session ...: comm may hold spaces, so split after it.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == sid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


# What upstream's runner gives the API server it starts (envtest with raised in-flight limits).
APISERVER_FLAGS = ("--max-requests-inflight=800", "--max-mutating-requests-inflight=400")
RECORDER_DONE = "\tRecorder done"  # the runner's log line once its recorder has stopped


@contextlib.contextmanager
def own_control_plane(kube_bin: Path, crds: Path, out: Path) -> Iterator[KubeCluster]:
    """etcd and kube-apiserver (the runner's binaries and in-flight limits) with upstream's CRDs."""
    cluster = KubeCluster(kube_bin, out / "cluster")
    try:
        cluster.start_apiserver(extra_flags=APISERVER_FLAGS)
        cluster.kubectl("apply", "--server-side", "-f", str(crds))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        assert cluster.creds is not None
        # Certificates inline, as the runner writes its own: the metrics poller reads them so.
        write_kubeconfig(out / "kubeconfig", cluster.server, cluster.creds, inline=True)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(out / "cluster" / "etcd", ignore_errors=True)  # gigabytes at full scale


class WarmController:
    """A controller started before upstream's runner, as in a cluster where it runs before jobs arrive.

    It gets what the runner gives a controller it starts (``--kubeconfig``, SIGINT once the
    recorder is done) and leaves the same record, ``<name>.stats.yaml``: wall from the
    runner's start to the controller's exit, CPU and peak RSS of the whole process.
    """

    def __init__(self, binary: Path, out: Path, env: dict[str, str]) -> None:
        self.binary = binary
        self.out = out
        self.log = out / f"{binary.name}.out.log"
        self.before_stop: Callable[[], None] | None = None  # e.g. a last read of its /metrics
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [str(binary), "--kubeconfig", str(out / "kubeconfig")],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def warm_up(self, seconds: float) -> None:
        time.sleep(seconds)
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.binary.name} exited during its warm-up; see {self.log}")

    def stop_after_recording(self, runner: subprocess.Popen[bytes], runner_log: Path, since: float) -> None:
        """Wait for the runner's recorder to finish (or the runner to end), then stop and record."""
        marker = RECORDER_DONE.encode()
        tail = b""
        with runner_log.open("rb") as f:
            while runner.poll() is None:
                # Keep the last read's end: the line may have been cut between two reads.
                tail = tail[-len(marker) :] + f.read()
                if marker in tail:
                    break
                time.sleep(0.2)
        if self.before_stop is not None:
            self.before_stop()
        self.stop(since)

    def stop(self, since: float) -> None:
        if self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if deadline and time.monotonic() > deadline:
                kill_session(self.process.pid)  # once: SIGKILL ends it
                deadline = 0.0
            time.sleep(0.1)
        self.process.returncode = os.waitstatus_to_exitcode(status)
        stats = {
            "wallMs": round((time.monotonic() - since) * 1000),
            "userMs": round(usage.ru_utime * 1000),
            "sysMs": round(usage.ru_stime * 1000),
            "maxrss": usage.ru_maxrss,  # KiB, as the runner records it
        }
        (self.out / f"{self.binary.name}.stats.yaml").write_text(yaml.safe_dump(stats))


def _controller_binary(controller: str, out: Path, perf_bin: Path, minimalkueue_args: str) -> Path:
    """What the runner starts: minimalkueue, or a wrapper of the same name, or pykueue's wrapper."""
    if controller == "minimalkueue" and not minimalkueue_args:
        return perf_bin / "minimalkueue"
    if controller == "minimalkueue":
        # A wrapper of the same name, so the stats file and the runner's handling stay as they are.
        binary = out / "minimalkueue"
        real = shlex.quote(str(perf_bin / "minimalkueue"))
        binary.write_text(f'#!/bin/sh\nexec {real} {minimalkueue_args} "$@"\n')
    else:
        binary = out / "pykueue"
        binary.write_text(WRAPPER)
    binary.chmod(0o755)
    return binary


def run_once(
    controller: str,
    shape: str,
    scale: float,
    index: int,
    out: Path,
    bins: dict[str, Path],
    kueue_src: Path,
    pykueue_args: str,
    pykueue_bin: str = "",
    warm_up: float = 0.0,
    minimalkueue_args: str = "",
) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    run = Run(controller, shape, scale, index, str(out), warm_up_s=warm_up)
    generator = scaled_generator(shape, scale, out)
    binary = _controller_binary(controller, out, bins["perf"], minimalkueue_args)
    timeout = max(5.0, TIMEOUT_MINUTES[shape] * max(scale, 0.25))
    # pykueue serves /metrics on loopback for the lost-work cross-check (read after evictions).
    metrics_port = free_port() if controller == "pykueue" and "--metrics-port" not in pykueue_args else 0
    if metrics_port:
        pykueue_args = f"{pykueue_args} --metrics-port {metrics_port} --metrics-host 127.0.0.1"
    env = {
        **os.environ,
        "KUBEBUILDER_ASSETS": str(bins["kube"]),
        "PROJECT_DIR": str(kueue_src / "Makefile"),  # upstream's test utilities look for it at start
        "PYKUEUE_BIN": pykueue_bin or str(Path(sys.executable).parent / "pykueue"),
        "PYKUEUE_CONTROLLER_ARGS": pykueue_args,
        "PYKUEUE_LOG": str(out / "pykueue.log"),
    }
    crds = kueue_src / "config" / "components" / "crd" / "bases"
    argv = [
        str(bins["perf"] / "runner"),
        f"--o={out}",
        f"--crds={crds}",
        f"--generatorConfig={generator}",
        f"--timeout={timeout:g}m",
    ]
    started = time.monotonic()
    poller = MetricsPoller(out / "kubeconfig", series=out / "kueue-writes.jsonl")
    poller.start()
    watch = upstream_watch.RunWatch(out / "kubeconfig", metrics_port)
    if watch.metrics is not None:
        watch.metrics.on_evictions = not warm_up  # a warm controller is read once, before its stop
    watch.start()
    returncode = -1
    try:
        with contextlib.ExitStack() as stack:
            warm: WarmController | None = None
            if warm_up:
                # No --minimalKueue: the runner works in its in-cluster mode, on our control plane.
                stack.enter_context(own_control_plane(bins["kube"], crds, out))
                env["KUBECONFIG"] = str(out / "kubeconfig")
                poller.runner_pid = os.getpid()  # etcd and kube-apiserver are our children now
                warm = WarmController(binary, out, env)
                if watch.metrics is not None:
                    warm.before_stop = watch.metrics.scrape
                stack.callback(warm.stop, time.monotonic())  # whatever ends the run early
                warm.warm_up(warm_up)
            else:
                argv.append(f"--minimalKueue={binary}")
            returncode = _play(argv, env, out, poller, warm)
    except (RuntimeError, ControlPlaneError) as exc:
        run.error = str(exc)
    _finish_watch(run, watch, out)
    poller.stopping.set()
    poller.join(15)
    run.kueue_writes = kueue_requests(poller.last)
    run.control_plane_cpu_s = {name: round(cpu, 1) for name, cpu in sorted(poller.cpu.items())}
    (out / "apiserver-metrics.txt").write_text(poller.last)
    print(
        f"  {controller} {shape} run {index + 1}: runner exited {returncode} after "
        f"{time.monotonic() - started:.0f} s",
        flush=True,
    )
    stats_file = out / f"{binary.name}.stats.yaml"
    if run.error:
        return run
    if returncode != 0 or not (out / "summary.yaml").exists() or not stats_file.exists():
        run.error = f"runner exited {returncode}; see {out / 'runner.log'}"
        return run
    read_figures(run, generator, stats_file)
    if run.error:
        return run
    if run.workloads and not run.runner_usage_pct:
        # The recorder stops once no ClusterQueue status says pending or reserving: a
        # controller that wrote none by the generator's end ends the run (seen once, at a
        # tenth of the large-scale shape, with a controller slow to start).
        run.error = f"no Workload was admitted before the runner's recorder stopped; see {out / 'runner.log'}"
        return run
    _check(run, bins["perf"], stats_file)
    return run


def _check(run: Run, perf_bin: Path, stats_file: Path) -> None:
    """Upstream's checker's verdict on a recorded run, against the shape's full-scale bounds."""
    out = Path(run.out)
    check = subprocess.run(
        [
            str(perf_bin / "checker.test"),
            "-test.run=^TestScalability$",
            f"-summary={out / 'summary.yaml'}",
            f"-cmdStats={stats_file}",
            f"-range={SHAPES_DIR / run.shape / 'rangespec.yaml'}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    (out / "checker.log").write_text(check.stdout + check.stderr)
    run.ok = True
    run.verdict = "PASS" if check.returncode == 0 else "FAIL"


def _finish_watch(run: Run, watch: upstream_watch.RunWatch, out: Path) -> None:
    """Stop the bench's watches, keep their record and put the run's lost work and lag in ``run``."""
    watch.stop()
    watch.save(out / "watch.jsonl")
    if watch.metrics is not None:
        (out / "controller-metrics.txt").write_text(watch.metrics.last)
    for name, value in watch.figures().items():
        setattr(run, name, value)


def _play(
    argv: list[str], env: dict[str, str], out: Path, poller: MetricsPoller, warm: WarmController | None
) -> int:
    """Run upstream's runner to its end; a warm controller is stopped once its recorder is done."""
    with (out / "runner.log").open("w") as log:
        # Its own process group: a runner that ends on its deadline leaves its etcd and
        # kube-apiserver running, and they would load the next run.
        started = time.monotonic()
        process = subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        if warm is None:
            poller.runner_pid = process.pid
        else:
            warm.stop_after_recording(process, out / "runner.log", started)
        returncode = process.wait()
        kill_session(process.pid)
    return returncode


# ----------------------------------------------------------------------------- table


def _spread(values: list[float], digits: int = 1) -> str:
    if not values:
        return "-"
    fmt = f"{{:.{digits}f}}"
    if len(values) == 1:
        return fmt.format(values[0])
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


COLUMNS: list[tuple[str, Any, int]] = [
    ("wall s", lambda r: r.wall_s, 1),
    ("usage %", lambda r: r.usage_pct, 1),
    ("runner usage %", lambda r: r.runner_usage_pct, 1),
    ("TTA large s", lambda r: r.tta_s.get("large"), 1),
    ("TTA medium s", lambda r: r.tta_s.get("medium"), 1),
    ("TTA small s", lambda r: r.tta_s.get("small"), 1),
    ("evictions", lambda r: r.evictions, 0),
    ("lost CPU s", lambda r: r.lost_cpu_s, 1),
    ("lost CPU s (metric)", lambda r: r.metric_lost_cpu_s, 1),
    ("usage lag p50 s", lambda r: r.status_lag_s.get("p50"), 2),
    ("usage lag p99 s", lambda r: r.status_lag_s.get("p99"), 2),
    ("usage lag max s", lambda r: r.status_lag_s.get("max"), 2),
    ("seen admitted", lambda r: r.seen_admitted, 0),
    ("Workload status writes", lambda r: r.workload_status_writes or None, 0),
    ("CPU s", lambda r: r.cpu_s, 1),
    ("API server CPU s", lambda r: r.control_plane_cpu_s.get("kube-apiserver"), 1),
    ("peak RSS MiB", lambda r: r.rss_mib, 0),
]


def table(runs: list[Run]) -> str:
    lines = []
    # Runs of several invocations may be merged (--table-from), so group by shape and scale
    # and count the runs themselves rather than trusting their indexes.
    for shape, scale, warm_up in dict.fromkeys((r.shape, r.scale, r.warm_up_s) for r in runs):
        group = [r for r in runs if (r.shape, r.scale, r.warm_up_s) == (shape, scale, warm_up)]
        count = max(sum(1 for r in group if r.controller == c) for c in CONTROLLERS)
        what = f"min / median / max of {count} runs" if count > 1 else "one run"
        start = f"controller started {warm_up:g} s before the runner" if warm_up else "started by the runner"
        lines.append(f"\n{shape} (scale {scale:g}; {what}; {start})")
        header = ["controller", *(name for name, _, _ in COLUMNS), "checker"]
        rows = [header]
        medians: dict[str, list[float | None]] = {}
        for controller in CONTROLLERS:
            mine = [r for r in group if r.controller == controller and r.ok]
            failed = [r for r in group if r.controller == controller and not r.ok]
            if not mine and not failed:
                continue
            cells = [controller]
            meds: list[float | None] = []
            for _, get, digits in COLUMNS:
                values = [v for v in (get(r) for r in mine) if v is not None]
                cells.append(_spread(values, digits))
                meds.append(_median(values))
            verdicts = [r.verdict for r in mine] + ["ERROR"] * len(failed)
            cells.append(", ".join(verdicts))
            rows.append(cells)
            medians[controller] = meds
        if len(medians) == 2:
            ratio = ["pykueue / upstream (medians)"]
            for up, py in zip(medians["minimalkueue"], medians["pykueue"], strict=True):
                ratio.append(f"x{py / up:.2f}" if up and py is not None else "-")
            ratio.append("")
            rows.append(ratio)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for n, row in enumerate(rows):
            lines.append("| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + " |")
            if n == 0:
                lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    for r in runs:
        if not r.ok:
            lines.append(f"{r.controller} {r.shape} run {r.index + 1}: {r.error}")
    return "\n".join(lines)


def machine() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--controllers", default=",".join(CONTROLLERS), help="comma-separated")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of every workload set (1 = full)")
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole sequence this many times")
    parser.add_argument(
        "--out", type=Path, default=None, help="keep every run's files here (default: a temp dir)"
    )
    parser.add_argument(
        "--pykueue-args",
        default="--qps 50 --burst 100 --log-level WARNING",
        help="flags for `pykueue controller` (upstream's client limits by default)",
    )
    parser.add_argument(
        "--pykueue-bin", default="", help="the `pykueue` command to run (e.g. a profiler's wrapper)"
    )
    parser.add_argument(
        "--minimalkueue-args",
        default="",
        help="extra flags for minimalkueue, e.g. --zap-log-level=2 to log every scheduling "
        "cycle (with --warm-up its output is kept in minimalkueue.out.log)",
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="start each controller this long before the runner, on a control plane of ours "
        "(default 0: the runner starts it together with its generator, as upstream's harness does)",
    )
    parser.add_argument(
        "--table-from",
        type=Path,
        nargs="+",
        default=None,
        help="print the table of earlier runs (their runs.json files) and run nothing",
    )
    args = parser.parse_args()
    if args.table_from:
        earlier = [Run(**row) for path in args.table_from for row in json.loads(path.read_text())]
        print(table(earlier))
        return 0
    shapes = [s for s in args.shapes.split(",") if s]
    controllers = [c for c in args.controllers.split(",") if c]
    for name in shapes:
        if name not in SHAPES:
            parser.error(f"unknown shape {name!r}")
    for name in controllers:
        if name not in CONTROLLERS:
            parser.error(f"unknown controller {name!r}")
    bins = {"kube": _bin_dir("kube-binaries"), "perf": _bin_dir("kueue-perf-binaries")}
    kueue_src = _bin_dir("kueue-perf-binaries", "--print-src")
    out = args.out or Path(tempfile.mkdtemp(prefix="pykueue-bench-upstream-"))
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"upstream runner, minimalkueue and checker: {bins['perf']}; control plane: {bins['kube']}; "
        f"results in {out}",
        flush=True,
    )
    runs: list[Run] = []
    for index in range(args.runs):
        for shape in shapes:
            for controller in controllers:
                where = out / f"{shape}-{controller}-{index + 1}"
                if where.exists():
                    shutil.rmtree(where)
                run = run_once(
                    controller,
                    shape,
                    args.scale,
                    index,
                    where,
                    bins,
                    kueue_src,
                    args.pykueue_args,
                    args.pykueue_bin,
                    args.warm_up,
                    args.minimalkueue_args,
                )
                runs.append(run)
                (out / "runs.json").write_text(json.dumps([asdict(r) for r in runs], indent=2))
    print(table(runs))
    print(f"\nmachine: {machine()} at the end; pykueue controller flags: {args.pykueue_args}")
    print(f"runs: {out / 'runs.json'}")
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
