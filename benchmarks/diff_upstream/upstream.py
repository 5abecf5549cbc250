"""Playing a case on a real kube-apiserver with upstream's scheduler (the oracle), and reading back what
users see.

The oracle (hack/diff-upstream/oracle, built by hack/upstream-oracle) is stopped while a step changes the
objects and started again for the `settle` that follows, so that every change of a step is stored before
upstream's first cycle sees any of it, as a scenario's step is applied whole before its cycles. The
oracle starts its scheduler `scheduler_delay` after its informers, so its queues hold every stored
Workload by then; the step ends once nothing the driver reads has changed for `quiet` seconds.

Upstream stamps each Workload with the API server's creationTimestamp (whole seconds) and a random uid,
and orders equal priorities by them; the case handed to pykueue carries the same stamps (and lists a
step's Workloads in that order), and pykueue's clock follows the wall clock step by step (`advance`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from benchmarks.diff_upstream import compare
from pykueue.api import quantity
from pykueue.devcluster.controlplane import ApiError, KubeCluster, find_bin_dir
from pykueue.devcluster.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
GROUP = "/apis/kueue.x-k8s.io/v1beta2"
CLUSTER_KINDS = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "AdmissionCheck": "admissionchecks",
}
NAMESPACED_KINDS = {"LocalQueue": "localqueues", "Workload": "workloads"}
# Deleted in this order between cases (Workloads first, so no queue is in use).
RESET_ORDER = (
    "workloads",
    "localqueues",
    "clusterqueues",
    "cohorts",
    "resourceflavors",
    "workloadpriorityclasses",
    "admissionchecks",
)


# Seconds without a change in what users see that end a step upstream. Upstream itself waits a second
# twice: a ClusterQueue's status (its flavorsReservation) is written a second after the Workload event
# that changed it (constants.UpdatesBatchPeriod), and Workloads parked as inadmissible are requeued a
# second after quota is freed (the requeuer's batch period). Changes a user sees can so be 1.0-1.2 s
# apart on a loaded machine (measured: docs/differential.md, "Throughput"); the window is that second
# plus room for the API server's and the oracle's latency.
QUIET = 1.5
# The most a step waits for a ClusterQueue's status to catch up with its Workloads (`_usage_lags`).
LAG_GRACE = 5.0
# How often the driver reads what users see while it waits (each read lists Workloads, ClusterQueues
# and LocalQueues and asks the oracle for its queues).
POLL = 0.25


class OracleError(RuntimeError):
    pass


class NotSettled(OracleError):
    """Upstream kept changing what users see; `preemptions` is the most times one Workload was preempted
    (several: upstream's preemption loop between a victim and its preemptor, kubernetes-sigs/kueue#14543)."""

    def __init__(self, message: str, preemptions: int) -> None:
        super().__init__(message)
        self.preemptions = preemptions


def _die_with_parent() -> None:
    """In the child before exec: the oracle gets SIGTERM when the driver dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def build_oracle() -> Path:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "upstream-oracle")], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def upstream_source() -> Path:
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "upstream-oracle"), "--print-src"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def kueue_config(config: dict[str, Any]) -> dict[str, Any]:
    """The scenario's `config` as upstream's Configuration (config.kueue.x-k8s.io/v1beta2)."""
    doc: dict[str, Any] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    fair = config.get("fairSharing") or {}
    if fair.get("enable"):
        doc["fairSharing"] = {k: v for k, v in fair.items() if k != "enable"}
    if config.get("admissionFairSharing"):
        doc["admissionFairSharing"] = config["admissionFairSharing"]
    wait = config.get("waitForPodsReady") or {}
    if wait.get("enable", True) and wait:
        # v1beta2 has no `enable`: the block's presence turns it on (the scenario format keeps v1beta1's key).
        doc["waitForPodsReady"] = {k: v for k, v in wait.items() if k != "enable"}
    # pykueue gives a pending Workload upstream's granular reasons (WaitingForQuota, NoMatchingFlavor, ...),
    # which upstream v0.19 gives only with this beta gate on (it is off by default there): the reasons are
    # compared with it on, and the default is a documented difference (docs/semantics.md).
    doc["featureGates"] = {"UnadmittedWorkloadsObservability": True, **(config.get("featureGates") or {})}
    return doc


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def _usage_lags(wls: list[dict[str, Any]], reported: dict[str, Any]) -> bool:
    """Whether some ClusterQueue's status (`flavorsReservation`, what the driver compares as its usage)
    differs from the sum of its Workloads' reservations. Upstream writes that status a second after the
    Workload event (its batch period), later on a crowded machine: until then the step is not over, however
    long nothing else has changed."""
    held: dict[str, dict[str, dict[str, int]]] = {}
    for wl in wls:
        status = wl.get("status") or {}
        conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
        adm = status.get("admission")
        if not adm or conds.get("QuotaReserved") != "True" or conds.get("Finished") == "True":
            continue
        per = held.setdefault(adm["clusterQueue"], {})
        for ps in adm.get("podSetAssignments") or []:
            flavors = ps.get("flavors") or {}
            for res, value in (ps.get("resourceUsage") or {}).items():
                if res in flavors:
                    slot = per.setdefault(flavors[res], {})
                    slot[res] = slot.get(res, 0) + quantity.parse(value)
    expected = {
        cq: {f: {r: quantity.format_milli(v) for r, v in rs.items()} for f, rs in fl.items()}
        for cq, fl in held.items()
    }
    return compare.normalized_usage(expected) != compare.normalized_usage(reported)


class Upstream:
    """One control plane (etcd + kube-apiserver with upstream's CRDs) for many cases."""

    def __init__(
        self, workdir: Path, *, quiet: float = QUIET, scheduler_delay: float = 0.5, log_level: str = "error"
    ) -> None:
        self.workdir = workdir
        self.quiet = quiet
        self.scheduler_delay = scheduler_delay
        self.log_level = log_level
        self.oracle = build_oracle()
        self.crds = upstream_source() / "config" / "components" / "crd" / "bases"
        self.cluster = KubeCluster(find_bin_dir(), workdir / "cluster")
        self.namespaces: set[str] = set()
        self.proc: subprocess.Popen[bytes] | None = None
        self.queues_url = ""
        self.runs = 0

    def start(self) -> None:
        self.cluster.start_apiserver()
        self.cluster.kubectl("apply", "--server-side", "-f", str(self.crds))
        deadline = time.monotonic() + 60
        # Read here rather than with `kubectl wait --for=condition=Established`, which fails outright
        # when it meets a CRD with no conditions yet (several API servers starting at once, --workers).
        while not self._crds_established():
            if time.monotonic() > deadline:
                raise OracleError("upstream's CRDs were not Established within 60 s")
            time.sleep(0.2)
        # Established is not yet served: the API answers 429 while its storage initializes.
        for plural in RESET_ORDER:
            while True:
                try:
                    self.cluster.get(f"{GROUP}/{plural}")
                    break
                except ApiError as exc:
                    if exc.status != 429 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

    def _crds_established(self) -> bool:
        crds = self.cluster.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
        return bool(crds) and all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
            for crd in crds
        )

    def stop(self) -> None:
        self._stop_oracle()
        self.cluster.stop()

    @contextlib.contextmanager
    def running(self) -> Iterator[Upstream]:
        try:
            self.start()
            yield self
        finally:
            self.stop()

    # -- one case -----------------------------------------------------------------------------

    def play(self, doc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Play the case; return upstream's view at the end of every `settle`, and the case as pykueue must
        run it (stamps, order, the clock's advances, `finish` lists resolved, an `expect: {}` after each
        `settle` so that pykueue reports its state there too)."""
        self._reset()
        self.runs += 1
        config_file = self.workdir / f"config-{self.runs}.yaml"
        config_file.write_text(yaml.safe_dump(kueue_config(doc.get("config") or {})))
        out = copy.deepcopy(doc)
        out_steps: list[dict[str, Any]] = []
        views: list[dict[str, Any]] = []
        preempted: set[str] = set()
        workloads = [o for o in doc["objects"] if o["kind"] == "Workload"]
        for obj in doc["objects"]:
            if obj["kind"] != "Workload":
                self._create(obj)
            if obj["kind"] == "AdmissionCheck":
                self._activate_check(obj["metadata"]["name"])
        stamped = self._create_workloads(workloads)
        clock = math.floor(time.time())
        out["now"] = _stamp(clock)
        out["objects"] = [o for o in out["objects"] if o["kind"] != "Workload"] + stamped
        for step in doc["steps"]:
            ((kind, value),) = step.items()
            if kind == "settle":
                started = self._run_oracle(config_file)
                now = math.floor(started + self.scheduler_delay)
                if now > clock:
                    out_steps.append({"advance": f"{now - clock}s"})
                    clock = now
                out_steps.append(step)
                self._wait_quiet()
                view = self.view(preempted)  # while the oracle runs: its queues are part of it
                self._stop_oracle()
                views.append(view)
                out_steps.append({"expect": {}})
            elif kind == "apply":
                for obj in value:
                    if obj["kind"] != "Workload":
                        self._replace(obj)
                value = [o for o in value if o["kind"] == "Workload"]
                new = [o for o in value if o.get("spec", {}).get("active", True) is not False]
                off = [o for o in value if o.get("spec", {}).get("active", True) is False]
                applied = self._create_workloads(new)
                for obj in off:
                    self._deactivate(obj)
                    applied.append(self._restamp(obj))
                out_steps.append({"apply": [o for o in step["apply"] if o["kind"] != "Workload"] + applied})
            elif kind == "finish":
                admitted = views[-1]["admitted"] if views else {}
                keys = [k for k in value if k in admitted]
                for k in keys:
                    self._finish(k)
                if keys:
                    out_steps.append({"finish": keys})
            elif kind == "delete":
                for ref in value:
                    self._delete_workload(ref["namespace"], ref["name"])
                out_steps.append(step)
            elif kind == "checks":
                played = self._play_checks(value, views[-1] if views else None)
                if played:
                    out_steps.append({"checks": played})
            elif kind == "podsReady":
                admitted = views[-1]["admitted"] if views else {}
                keys = [k for k in value if k in admitted]
                for k in keys:
                    self._set_condition(k, "PodsReady", "True", "PodsReady")
                if keys:
                    out_steps.append({"podsReady": keys})
            else:
                raise OracleError(f"step kind {kind!r} is not played on upstream yet")
        out["steps"] = out_steps
        return views, out

    # -- reading ------------------------------------------------------------------------------

    def queues(self) -> dict[str, dict[str, list[str]]]:
        """The running oracle's queues: {"active": {cq: [keys]}, "inadmissible": {cq: [keys]}}, sorted,
        ClusterQueues with none left out."""
        if self.proc is None or not self.queues_url:
            return {"active": {}, "inadmissible": {}}
        try:
            with urllib.request.urlopen(self.queues_url, timeout=5) as resp:
                raw = json.loads(resp.read().decode())
        except OSError:
            return {"active": {}, "inadmissible": {}}  # not serving yet
        return {
            part: {cq: sorted(keys) for cq, keys in sorted((raw.get(part) or {}).items()) if keys}
            for part in ("active", "inadmissible")
        }

    def view(self, preempted: set[str]) -> dict[str, Any]:
        """What users see now; `preempted` accumulates over the case (a deleted Workload stays in it)."""
        wls = self.cluster.get(f"{GROUP}/workloads")["items"]
        admitted: dict[str, Any] = {}
        pending: list[str] = []
        finished: list[str] = []
        why: dict[str, str] = {}
        reasons: dict[str, str] = {}
        deactivated: list[str] = []
        checks: dict[str, dict[str, str]] = {}
        quota_only: list[str] = []
        requeue_count: dict[str, int] = {}
        pods_ready: list[str] = []
        for wl in wls:
            key = _key(wl)
            status = wl.get("status") or {}
            conds = {c["type"]: c for c in status.get("conditions") or []}
            if status.get("admissionChecks"):
                checks[key] = {
                    c["name"]: c["state"] for c in sorted(status["admissionChecks"], key=lambda c: c["name"])
                }
            if (status.get("requeueState") or {}).get("count"):
                requeue_count[key] = int(status["requeueState"]["count"])
            for ev in (status.get("schedulingStats") or {}).get("evictions") or []:
                if ev.get("reason") == "Preempted":
                    preempted.add(key)
            if conds.get("Preempted", {}).get("status") == "True":
                why[key] = conds["Preempted"]["reason"]
            active = (wl.get("spec") or {}).get("active", True) is not False
            if not active:
                deactivated.append(key)
            if conds.get("Finished", {}).get("status") == "True":
                finished.append(key)
            elif conds.get("QuotaReserved", {}).get("status") == "True" and status.get("admission"):
                adm = status["admission"]
                admitted[key] = {
                    "clusterQueue": adm["clusterQueue"],
                    "podSets": {
                        ps["name"]: {
                            "count": ps.get("count", 0),
                            "flavors": dict(sorted((ps.get("flavors") or {}).items())),
                        }
                        for ps in adm.get("podSetAssignments") or []
                    },
                }
                if conds.get("Admitted", {}).get("status") != "True":
                    quota_only.append(key)
                if conds.get("PodsReady", {}).get("status") == "True":
                    pods_ready.append(key)
            elif active:
                pending.append(key)
                if "QuotaReserved" in conds:
                    reasons[key] = conds["QuotaReserved"]["reason"]
        usage: dict[str, Any] = {}
        for cq in self.cluster.get(f"{GROUP}/clusterqueues")["items"]:
            per: dict[str, Any] = {}
            for fl in (cq.get("status") or {}).get("flavorsReservation") or []:
                for res in fl.get("resources") or []:
                    per.setdefault(fl["name"], {})[res["name"]] = res.get("total", "0")
            usage[cq["metadata"]["name"]] = per
        queues = self.queues()
        if self.proc is not None:
            # A pending Workload in neither list is the head the scheduler has popped this moment (a
            # StrictFIFO head that cannot fit is retried without pause): it is in its active queue.
            listed = {k for part in queues.values() for keys in part.values() for k in keys}
            lq_cq = {
                (lq["metadata"]["namespace"], lq["metadata"]["name"]): lq["spec"]["clusterQueue"]
                for lq in self.cluster.get(f"{GROUP}/localqueues")["items"]
            }
            by_key = {_key(wl): wl for wl in wls}
            for key in pending:
                if key in listed:
                    continue
                wl = by_key[key]
                cq = lq_cq.get((wl["metadata"]["namespace"], wl["spec"].get("queueName", "")))
                if cq:
                    held = queues["active"].setdefault(cq, [])
                    held.append(key)
                    held.sort()
            queues["active"] = dict(sorted(queues["active"].items()))
        return {
            "admitted": admitted,
            "queues": queues,
            "pending": sorted(pending),
            "finished": sorted(finished),
            "preempted": sorted(preempted),
            "preemptedWhy": why,
            "pendingReason": reasons,
            "deactivated": sorted(deactivated),
            "clusterQueueUsage": usage,
            "admissionChecks": dict(sorted(checks.items())),
            "quotaOnly": sorted(quota_only),
            "requeueCount": dict(sorted(requeue_count.items())),
            "podsReady": sorted(pods_ready),
        }

    def _fingerprint(self) -> tuple[Any, ...]:
        """What users see (not resourceVersions: upstream rewrites the status of a StrictFIFO head that
        cannot fit on every retry, which changes nothing a user reads), whether an eviction is still on
        its way (an evicted Workload still holding its quota), and whether a ClusterQueue's status still
        lags behind its Workloads (`_usage_lags`)."""
        wls = self.cluster.get(f"{GROUP}/workloads")["items"]
        busy = any(
            {c["type"]: c["status"] for c in (w.get("status") or {}).get("conditions") or []}.get("Evicted")
            == "True"
            and (w.get("status") or {}).get("admission")
            for w in wls
        )
        view = self.view(set())
        return busy, _usage_lags(wls, view["clusterQueueUsage"]), json.dumps(view, sort_keys=True)

    def _wait_quiet(self, timeout: float = 60.0) -> None:
        time.sleep(self.scheduler_delay)
        deadline = time.monotonic() + timeout
        last = self._fingerprint()
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(POLL)
            self._check_oracle()
            now = self._fingerprint()
            if now != last:
                last, since = now, time.monotonic()
                continue
            quiet_for = time.monotonic() - since
            # A lagging ClusterQueue status holds the step LAG_GRACE at most: should upstream's own
            # accounting ever differ from the Workloads' for good, the step still ends.
            if not now[0] and quiet_for >= self.quiet and (not now[1] or quiet_for >= LAG_GRACE):
                return
        raise NotSettled(
            f"upstream did not settle within {timeout}s (an evicted Workload still holding quota: {last[0]}); "
            f"what users see last: {last[2]}",
            self._most_preemptions(),
        )

    def _most_preemptions(self) -> int:
        most = 0
        for wl in self.cluster.get(f"{GROUP}/workloads")["items"]:
            for ev in ((wl.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []:
                if ev.get("reason") == "Preempted":
                    most = max(most, int(ev.get("count", 0)))
        return most

    # -- writing ------------------------------------------------------------------------------

    def _path(self, obj: dict[str, Any]) -> str:
        kind = obj["kind"]
        if kind == "Namespace":
            return "/api/v1/namespaces"
        if kind in CLUSTER_KINDS:
            return f"{GROUP}/{CLUSTER_KINDS[kind]}"
        if kind in NAMESPACED_KINDS:
            return f"{GROUP}/namespaces/{obj['metadata']['namespace']}/{NAMESPACED_KINDS[kind]}"
        raise OracleError(f"kind {kind} is not played on upstream yet")

    def _create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Namespace":
            name = obj["metadata"]["name"]
            if name in self.namespaces:
                return obj
            if self.cluster.get_or_none(f"/api/v1/namespaces/{name}") is None:
                self.cluster.create("/api/v1/namespaces", obj)
            self.namespaces.add(name)
            return obj
        body = copy.deepcopy(obj)
        body.pop("status", None)
        return dict(self.cluster.create(self._path(obj), body))

    def _create_workloads(self, workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create them; return them as pykueue must see them: stamped, in upstream's queue order."""
        stamped = []
        for obj in workloads:
            self._create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": obj["metadata"]["namespace"]}}
            )
            made = self._create(obj)
            copy_ = copy.deepcopy(obj)
            copy_["metadata"]["creationTimestamp"] = made["metadata"]["creationTimestamp"]
            copy_["metadata"]["uid"] = made["metadata"]["uid"]
            stamped.append(copy_)
        stamped.sort(key=lambda o: (o["metadata"]["creationTimestamp"], o["metadata"]["uid"]))
        return stamped

    def _replace(self, obj: dict[str, Any]) -> None:
        """A changed cluster-scoped object (a ClusterQueue with new quotas): its spec replaced."""
        path = f"{self._path(obj)}/{obj['metadata']['name']}"
        current = self.cluster.get(path)
        current["spec"] = copy.deepcopy(obj["spec"])
        self.cluster.request("PUT", path, current)

    def _restamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        got = self.cluster.get(
            f"{GROUP}/namespaces/{obj['metadata']['namespace']}/workloads/{obj['metadata']['name']}"
        )
        copy_ = copy.deepcopy(obj)
        copy_["metadata"]["creationTimestamp"] = got["metadata"]["creationTimestamp"]
        copy_["metadata"]["uid"] = got["metadata"]["uid"]
        return copy_

    def _wl_path(self, key: str) -> str:
        ns, name = key.split("/", 1)
        return f"{GROUP}/namespaces/{ns}/workloads/{name}"

    def _deactivate(self, obj: dict[str, Any]) -> None:
        self.cluster.request(
            "PATCH",
            self._wl_path(_key(obj)),
            {"spec": {"active": False}},
            content_type="application/merge-patch+json",
        )

    def _finish(self, key: str) -> None:
        wl = self.cluster.get(self._wl_path(key))
        conds = [c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] != "Finished"]
        conds.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "finished by the differential test",
                "lastTransitionTime": _stamp(time.time()),
            }
        )
        wl.setdefault("status", {})["conditions"] = conds
        self.cluster.request("PUT", self._wl_path(key) + "/status", wl)

    def _activate_check(self, name: str) -> None:
        """AdmissionCheck Active=True, as its controller would set it (the oracle runs none)."""
        path = f"{GROUP}/admissionchecks/{name}"
        check = self.cluster.get(path)
        check["status"] = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "played by the differential test",
                    "lastTransitionTime": _stamp(time.time()),
                }
            ]
        }
        self.cluster.request("PUT", path + "/status", check)

    def _play_checks(
        self, value: dict[str, dict[str, str]], last: dict[str, Any] | None
    ) -> dict[str, dict[str, str]]:
        """Set check states as a check controller would; return those played: only on Workloads holding
        quota at the last step end and only checks upstream lists on them (the generator cannot know)."""
        if last is None:
            return {}
        played: dict[str, dict[str, str]] = {}
        for key, states in value.items():
            listed = last["admissionChecks"].get(key, {})
            if key not in last["admitted"]:
                continue
            mine = {name: state for name, state in states.items() if name in listed}
            if not mine:
                continue
            wl = self.cluster.get(self._wl_path(key))
            now = _stamp(time.time())
            for check in (wl.get("status") or {}).get("admissionChecks") or []:
                if check["name"] in mine and check["state"] != mine[check["name"]]:
                    check["state"] = mine[check["name"]]
                    check["message"] = "played by the differential test"
                    check["lastTransitionTime"] = now
            self.cluster.request("PUT", self._wl_path(key) + "/status", wl)
            played[key] = mine
        return played

    def _set_condition(self, key: str, kind: str, status: str, reason: str) -> None:
        wl = self.cluster.get(self._wl_path(key))
        conds = [c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] != kind]
        conds.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": "played by the differential test",
                "lastTransitionTime": _stamp(time.time()),
            }
        )
        wl.setdefault("status", {})["conditions"] = conds
        self.cluster.request("PUT", self._wl_path(key) + "/status", wl)

    def _delete_workload(self, ns: str, name: str) -> None:
        path = self._wl_path(f"{ns}/{name}")
        with contextlib.suppress(ApiError):
            self.cluster.request(
                "PATCH", path, {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json"
            )
        self.cluster.delete(path)

    def _reset(self) -> None:
        """Delete every Kueue object of the previous case (the oracle is stopped: no finalizer is served)."""
        for plural in RESET_ORDER:
            for obj in self.cluster.get(f"{GROUP}/{plural}")["items"]:
                meta = obj["metadata"]
                base = (
                    f"{GROUP}/namespaces/{meta['namespace']}/{plural}"
                    if "namespace" in meta
                    else f"{GROUP}/{plural}"
                )
                path = f"{base}/{meta['name']}"
                if meta.get("finalizers"):
                    with contextlib.suppress(ApiError):
                        self.cluster.request(
                            "PATCH",
                            path,
                            {"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json",
                        )
                self.cluster.delete(path)

    # -- the oracle process ---------------------------------------------------------------------

    def _run_oracle(self, config_file: Path) -> float:
        self._stop_oracle()
        log = open(self.workdir / "oracle.log", "ab")  # noqa: SIM115 - kept open for the child
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)}
        port = free_port()
        self.queues_url = f"http://127.0.0.1:{port}/queues"
        started = time.time()
        self.proc = subprocess.Popen(
            [
                str(self.oracle),
                f"--config={config_file}",
                f"--scheduler-delay={int(self.scheduler_delay * 1000)}ms",
                f"--zap-log-level={self.log_level}",
                f"--queues-addr=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=log,
            env=env,
            preexec_fn=_die_with_parent,  # the driver starts no threads
        )
        log.close()
        return started

    def _check_oracle(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            tail = (self.workdir / "oracle.log").read_text(errors="replace")[-3000:]
            raise OracleError(f"the oracle exited ({self.proc.returncode}):\n{tail}")

    def _stop_oracle(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)
