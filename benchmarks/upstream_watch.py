"""What `upstream_bench` sees of a run through its own watches (issue 46): lost work and status lag.

Two watches on the runner's API server, in the bench process (never in the controller), one on
Workloads and one on ClusterQueues, record a compact summary of every object they see with the
time it arrived (``Seen``). After the run two pure functions read that record, the same way for
both controllers:

* ``lost_work``: for each eviction (the Evicted condition turning True, as upstream's recorder
  counts them), the workload's admitted resources times the time since its quota reservation
  was first seen; the work the eviction threw away.
* ``usage_lag``: per ClusterQueue, the truth (the summed usage of the Workloads admitted to it
  and not finished, what upstream's cache counts in ``status.flavorsUsage``) against what its
  status says; for every change of the truth, the time until the status next agrees with it.

For pykueue, ``ControllerMetrics`` also reads the controller's own account of the same thing,
``pykueue_preempted_resource_seconds_total``, as a cross-check.
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from pykueue.api import quantity

# (flavor, resource) -> milli-units
Usage = dict[tuple[str, str], int]
LOST_WORK_METRIC = "pykueue_preempted_resource_seconds"


@dataclass(frozen=True)
class WorkloadSeen:
    """A Workload as a watch event showed it, ``t`` seconds (monotonic) after nothing in particular."""

    t: float
    key: str  # namespace/name
    cluster_queue: str = ""
    usage: Usage = field(default_factory=dict)
    reserved: bool = False  # QuotaReserved True with an admission
    admitted: bool = False  # Admitted True with an admission
    evicted: bool = False
    finished: bool = False


@dataclass(frozen=True)
class QueueSeen:
    """A ClusterQueue's ``status.flavorsUsage`` (zero totals left out) as a watch event showed it."""

    t: float
    name: str
    usage: Usage = field(default_factory=dict)


Seen = WorkloadSeen | QueueSeen


def _true_conditions(obj: dict[str, Any]) -> set[str]:
    return {
        c.get("type", "")
        for c in (obj.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }


def workload_seen(obj: dict[str, Any], t: float, deleted: bool = False) -> WorkloadSeen:
    """The summary of a Workload (v1beta2): its admission's resources per flavor and its state."""
    meta = obj.get("metadata") or {}
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    if deleted:  # gone: it holds nothing any more
        return WorkloadSeen(t, key, finished=True)
    admission = (obj.get("status") or {}).get("admission") or {}
    usage: Usage = {}
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            where = (str(flavors.get(resource, "")), str(resource))
            usage[where] = usage.get(where, 0) + quantity.parse(amount)
    true = _true_conditions(obj)
    return WorkloadSeen(
        t,
        key,
        cluster_queue=str(admission.get("clusterQueue", "")),
        usage={k: v for k, v in usage.items() if v},
        reserved=bool(admission) and "QuotaReserved" in true,
        admitted=bool(admission) and "Admitted" in true,
        evicted="Evicted" in true,
        finished="Finished" in true,
    )


def queue_seen(obj: dict[str, Any], t: float, deleted: bool = False) -> QueueSeen:
    name = str((obj.get("metadata") or {}).get("name", ""))
    usage: Usage = {}
    if not deleted:
        for flavor in (obj.get("status") or {}).get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                milli = quantity.parse(resource.get("total", 0) or 0)
                if milli:
                    usage[(str(flavor.get("name", "")), str(resource.get("name", "")))] = milli
    return QueueSeen(t, name, usage)


# ----------------------------------------------------------------------------- lost work


@dataclass
class LostWork:
    evictions: int = 0
    # "flavor/resource" -> resource-seconds (whole units: CPU-core-seconds for cpu, byte-seconds for memory)
    resource_seconds: dict[str, float] = field(default_factory=dict)

    def of_resource(self, resource: str) -> float:
        return sum(v for k, v in self.resource_seconds.items() if k.rpartition("/")[2] == resource)


def lost_work(events: Iterable[Seen]) -> LostWork:
    """Each eviction's resources times the time its workload had held its reservation.

    The reservation counts from the first event that showed it (QuotaReserved True) until the
    event that showed the Evicted condition turn True; it ends when an event shows it gone
    (the runner unsets it after an eviction, as a job that stopped), so a workload evicted,
    requeued and admitted again starts a new count.
    """
    lost = LostWork()
    since: dict[str, tuple[float, Usage]] = {}
    evicted: dict[str, bool] = {}
    for e in sorted((e for e in events if isinstance(e, WorkloadSeen)), key=lambda e: e.t):
        if e.reserved and e.key not in since:
            since[e.key] = (e.t, e.usage)
        if e.evicted and not evicted.get(e.key, False):
            lost.evictions += 1
            if e.key in since:
                start, usage = since[e.key]
                for (flavor, resource), milli in usage.items():
                    name = f"{flavor}/{resource}"
                    lost.resource_seconds[name] = lost.resource_seconds.get(name, 0.0) + milli / 1000 * (
                        e.t - start
                    )
        if not e.reserved:
            since.pop(e.key, None)
        evicted[e.key] = e.evicted
    return lost


# ----------------------------------------------------------------------------- status lag


@dataclass
class QueueLag:
    # For each change of the truth: seconds until the status next agreed with it.
    lags: list[float] = field(default_factory=list)
    # Changes the status never caught up with before the record ended (their lag runs to the end).
    unresolved: int = 0
    # Seconds the status differed from the truth, in all.
    stale_s: float = 0.0


def _add(total: Usage, usage: Usage, sign: int) -> None:
    for k, v in usage.items():
        n = total.get(k, 0) + sign * v
        if n:
            total[k] = n
        else:
            total.pop(k, None)


def usage_lag(events: Iterable[Seen]) -> dict[str, QueueLag]:
    """Per ClusterQueue, how long its ``status.flavorsUsage`` took to show each change of its usage.

    The truth is the summed admission usage of the Workloads admitted to it and not finished
    (evicted ones count until their admission is gone, as upstream's cache counts them). Every
    change of the truth at time t opens or extends a disagreement with the status; each change's
    lag is the time from t until the status equals the truth again, whatever value it then has
    (a status that skips an intermediate value is late by the time to the value it does show).
    A status that moves away from a truth that did not change (ahead of the watch on Workloads,
    or wrong) counts in ``stale_s`` but adds no lag.
    """
    held: dict[str, tuple[str, Usage]] = {}
    truth: dict[str, Usage] = {}
    status: dict[str, Usage] = {}
    differ_since: dict[str, float] = {}
    changes: dict[str, list[float]] = {}
    result: dict[str, QueueLag] = {}
    last = 0.0

    def settle(cq: str, t: float) -> None:
        lag = result.setdefault(cq, QueueLag())
        if truth.get(cq, {}) != status.get(cq, {}):
            differ_since.setdefault(cq, t)
            return
        if cq in differ_since:
            lag.stale_s += t - differ_since.pop(cq)
        lag.lags.extend(t - c for c in changes.pop(cq, []))

    for e in sorted(events, key=lambda e: e.t):
        last = e.t
        if isinstance(e, QueueSeen):
            status[e.name] = e.usage
            settle(e.name, e.t)
            continue
        holds = e.admitted and not e.finished and bool(e.cluster_queue)
        before = held.get(e.key)
        now = (e.cluster_queue, e.usage) if holds else None
        if before == now:
            continue
        touched = set()
        if before is not None:
            _add(truth.setdefault(before[0], {}), before[1], -1)
            touched.add(before[0])
            del held[e.key]
        if now is not None:
            _add(truth.setdefault(now[0], {}), now[1], 1)
            touched.add(now[0])
            held[e.key] = now
        for cq in touched:
            changes.setdefault(cq, []).append(e.t)
            settle(cq, e.t)
    for cq, open_changes in changes.items():
        lag = result.setdefault(cq, QueueLag())
        lag.unresolved += len(open_changes)
        lag.lags.extend(last - c for c in open_changes)
    for cq, start in differ_since.items():
        result[cq].stale_s += last - start
    return result


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank p-th percentile (0 of nothing)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def lag_summary(lags: dict[str, QueueLag]) -> dict[str, float]:
    """p50 / p99 / max of every change's lag over all ClusterQueues, and the totals."""
    every = [x for lag in lags.values() for x in lag.lags]
    return {
        "p50": round(percentile(every, 50), 3),
        "p99": round(percentile(every, 99), 3),
        "max": round(max(every, default=0.0), 3),
        "changes": len(every),
        "unresolved": sum(lag.unresolved for lag in lags.values()),
        "stale_s": round(sum(lag.stale_s for lag in lags.values()), 1),
    }


def lag_by_queue(lags: dict[str, QueueLag]) -> dict[str, dict[str, float]]:
    return {
        cq: {
            "p50": round(percentile(lag.lags, 50), 3),
            "p99": round(percentile(lag.lags, 99), 3),
            "max": round(max(lag.lags, default=0.0), 3),
            "changes": len(lag.lags),
            "stale_s": round(lag.stale_s, 1),
        }
        for cq, lag in sorted(lags.items())
    }


def metric_lost_work(text: str) -> dict[str, float]:
    """``pykueue_preempted_resource_seconds_total`` summed per "flavor/resource"."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != LOST_WORK_METRIC:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                name = f"{sample.labels.get('flavor', '')}/{sample.labels.get('resource', '')}"
                found[name] = found.get(name, 0.0) + sample.value
    return found


def _row(e: Seen) -> list[Any]:
    usage = {f"{f}/{r}": milli for (f, r), milli in e.usage.items()}
    if isinstance(e, QueueSeen):
        return [round(e.t, 4), "cq", e.name, usage]
    flags = "".join(
        c for c, on in zip("raef", (e.reserved, e.admitted, e.evicted, e.finished), strict=True) if on
    )
    return [round(e.t, 4), "wl", e.key, usage, e.cluster_queue, flags]


def load(path: Path) -> list[Seen]:
    """A record written by ``RunWatch.save``."""
    seen: list[Seen] = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        usage = {tuple(k.split("/", 1)): v for k, v in row[3].items()}
        if row[1] == "cq":
            seen.append(QueueSeen(row[0], row[2], usage))
        else:
            flags = row[5]
            seen.append(
                WorkloadSeen(
                    row[0], row[2], row[4], usage, "r" in flags, "a" in flags, "e" in flags, "f" in flags
                )
            )
    return seen


# ----------------------------------------------------------------------------- live side

_CONNECTING = threading.Lock()


def connect(kubeconfig: Path) -> tuple[ssl.SSLContext, str]:
    """A TLS context with the kubeconfig's inline client certificate, and the server's URL."""
    with _CONNECTING:  # the callers share the files the certificate is written to
        doc = yaml.safe_load(kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        user = doc["users"][0]["user"]
        folder = kubeconfig.parent
        (folder / "client.crt").write_bytes(base64.b64decode(user["client-certificate-data"]))
        (folder / "client.key").write_bytes(base64.b64decode(user["client-key-data"]))
        context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        context.load_cert_chain(folder / "client.crt", folder / "client.key")
    return context, str(cluster["server"]).rstrip("/")


class ApiWatch(threading.Thread):
    """Watches one kind on the run's API server (once it answers) and records each object's summary.

    It resumes from the last resourceVersion when a watch ends and lists again when that is too
    old; what it records is a state, so an object seen twice changes nothing.
    """

    def __init__(
        self,
        kubeconfig: Path,
        path: str,
        summarise: Callable[[dict[str, Any], float, bool], Seen],
        sink: list[Seen],
        stopping: threading.Event,
        on_event: Callable[[Seen], None] | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.kubeconfig = kubeconfig
        self.path = path
        self.summarise = summarise
        self.sink = sink
        self.stopping = stopping
        self.on_event = on_event
        self.cpu_s = 0.0  # this thread's own CPU time, once it ended: what watching cost the bench

    def run(self) -> None:
        try:
            self._watch()
        finally:
            self.cpu_s = time.thread_time()

    def _watch(self) -> None:
        context: ssl.SSLContext | None = None
        server = ""
        version = ""
        while not self.stopping.is_set():
            try:
                if context is None:
                    if not self.kubeconfig.exists():
                        self.stopping.wait(0.5)
                        continue
                    context, server = connect(self.kubeconfig)
                query = "watch=1&timeoutSeconds=600" + (f"&resourceVersion={version}" if version else "")
                with urllib.request.urlopen(
                    f"{server}{self.path}?{query}", context=context, timeout=60
                ) as answer:
                    for line in answer:
                        t = time.monotonic()
                        event = json.loads(line)
                        if event.get("type") == "ERROR":  # e.g. 410 Gone: list again
                            version = ""
                            break
                        obj = event["object"]
                        version = obj["metadata"].get("resourceVersion", version)
                        if event["type"] == "BOOKMARK":
                            continue
                        seen = self.summarise(obj, t, event["type"] == "DELETED")
                        self.sink.append(seen)  # list.append is atomic: both watches share the sink
                        if self.on_event is not None:
                            self.on_event(seen)
                        if self.stopping.is_set():
                            return
            except (OSError, ValueError, KeyError, ssl.SSLError):
                self.stopping.wait(0.5)  # not up yet (no CRDs), or gone at the end


class ControllerMetrics(threading.Thread):
    """Reads pykueue's /metrics shortly after each eviction the watch sees, and every 30 s.

    The lost-work counter moves only on a preemption, so a read a second after the last
    eviction holds the run's figure without loading the controller with periodic reads.
    With ``on_evictions`` off it reads only when asked (`scrape`): a warm controller is read
    once before the bench stops it, since every read costs the controller a full gauge pass
    over its queues (about 20 s of its CPU over 435 reads at a third of large-scale).
    """

    def __init__(self, port: int, stopping: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.stopping = stopping
        self.wanted = threading.Event()
        self.last = ""
        self.on_evictions = True

    def poke(self, seen: Seen) -> None:
        if isinstance(seen, WorkloadSeen) and seen.evicted:
            self.wanted.set()

    def run(self) -> None:
        if not self.on_evictions:
            return
        while not self.stopping.is_set():
            if self.wanted.wait(30):
                self.wanted.clear()
                self.stopping.wait(1.0)  # let a burst of evictions end first
            self.scrape()

    def scrape(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(self.url, timeout=10) as answer:
                text = answer.read().decode()
            if text:
                self.last = text


class RunWatch:
    """Both watches (and pykueue's metrics reader) for one run."""

    def __init__(self, kubeconfig: Path, metrics_port: int = 0) -> None:
        self.stopping = threading.Event()
        self.seen: list[Seen] = []
        self.metrics = ControllerMetrics(metrics_port, self.stopping) if metrics_port else None
        poke = self.metrics.poke if self.metrics else None
        group = "/apis/kueue.x-k8s.io/v1beta2"
        self.threads: list[threading.Thread] = [
            ApiWatch(kubeconfig, f"{group}/workloads", workload_seen, self.seen, self.stopping, poke),
            ApiWatch(kubeconfig, f"{group}/clusterqueues", queue_seen, self.seen, self.stopping),
        ]
        if self.metrics is not None:
            self.threads.append(self.metrics)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(5)

    def save(self, path: Path) -> None:
        """The record, one JSON line per event (``load`` reads it back for another look)."""
        with path.open("w") as f:
            for e in sorted(self.seen, key=lambda e: e.t):
                f.write(json.dumps(_row(e)) + "\n")

    def figures(self) -> dict[str, Any]:
        """The run's lost work and status lag, as `Run` fields."""
        seen = list(self.seen)
        lost = lost_work(seen)
        lags = usage_lag(seen)
        figures: dict[str, Any] = {
            "watch_cpu_s": round(sum(t.cpu_s for t in self.threads if isinstance(t, ApiWatch)), 1),
            "watch_evictions": lost.evictions,
            "lost_cpu_s": round(lost.of_resource("cpu"), 1),
            "lost_work": {k: round(v, 1) for k, v in sorted(lost.resource_seconds.items())},
            "status_lag_s": lag_summary(lags),
            "status_lag_by_queue": lag_by_queue(lags),
        }
        if self.metrics is not None and self.metrics.last:
            counted = metric_lost_work(self.metrics.last)
            figures["metric_lost_work"] = {k: round(v, 1) for k, v in sorted(counted.items())}
            figures["metric_lost_cpu_s"] = round(
                sum(v for k, v in counted.items() if k.rpartition("/")[2] == "cpu"), 1
            )
        return figures
