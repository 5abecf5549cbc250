"""Upstream's kubectl plugin, ``kubectl kueue`` (kueuectl, built from sigs.k8s.io/kueue by hack/kueuectl),
against pykueue on the real control plane: create, list, stop and resume, with POSITION IN QUEUE read
through the aggregated visibility API."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from ..controlplane import KubeCluster
from .conftest import KUEUE, Kueue, LocalController, condition, is_true, wait
from .test_drop_in import _workload


def _kueuectl(cluster: KubeCluster, path: str, *args: str) -> str:
    """``kubectl kueue ARGS`` as a user types it: kubectl finds the plugin on PATH."""
    result = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "kueue", *args],
        capture_output=True,
        text=True,
        timeout=60,
        # kubectl refuses its own flags before a plugin's name: the kubeconfig goes by environment.
        env={**os.environ, "PATH": path, "KUBECONFIG": str(cluster.kubeconfig)},
    )
    assert result.returncode == 0, f"kubectl kueue {' '.join(args)}: {result.stderr}"
    return result.stdout


def _table(output: str) -> list[dict[str, str]]:
    """kubectl's table output as rows keyed by column title (titles are single words or joined by
    one space; columns are separated by at least two spaces)."""
    lines = [line for line in output.splitlines() if line.strip()]
    header = lines[0]
    starts = [0] + [
        i + 2 for i in range(len(header) - 2) if header[i : i + 2] == "  " and header[i + 2] != " "
    ]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    titles = [header[a:b].strip() for a, b in bounds]
    return [
        {title: line[a:b].strip() for title, (a, b) in zip(titles, bounds, strict=True)} for line in lines[1:]
    ]


def _by_name(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {row["NAME"]: row for row in rows}


def _workload_with_priority(ns: str, name: str, priority: int) -> dict[str, Any]:
    workload = _workload(ns, name, "team")
    workload["spec"]["priority"] = priority
    return workload


def _reserved(kueue: Kueue, ns: str, name: str) -> bool:
    return is_true(kueue.cluster.get_or_none(f"{KUEUE}/namespaces/{ns}/workloads/{name}"), "QuotaReserved")


@pytest.fixture
def queues_made_by_kueuectl(
    kueue: Kueue, kueuectl_path: str, visibility_controller: LocalController, kube_namespace: str
) -> str:
    """A flavor, a ClusterQueue (1 CPU) and a LocalQueue ``team``, each made by `kubectl kueue create`."""
    ns = kube_namespace
    cq = f"{ns}-cq"
    _kueuectl(kueue.cluster, kueuectl_path, "create", "resourceflavor", f"{ns}-flavor")
    kueue.applied.append(f"resourceflavor/{ns}-flavor")
    _kueuectl(
        kueue.cluster,
        kueuectl_path,
        "create",
        "clusterqueue",
        cq,
        "--queuing-strategy",
        "StrictFIFO",
        "--nominal-quota",
        f"{ns}-flavor:cpu=1;memory=8Gi",
    )
    kueue.applied.append(f"clusterqueue/{cq}")
    _kueuectl(kueue.cluster, kueuectl_path, "create", "localqueue", "team", "-c", cq, "-n", ns)
    kueue.applied.append(f"localqueue/team -n {ns}")
    return cq


def test_create_makes_the_queues_pykueue_admits_through(
    kueue: Kueue, kueuectl_path: str, queues_made_by_kueuectl: str, kube_namespace: str
) -> None:
    ns, cq = kube_namespace, queues_made_by_kueuectl
    stored = kueue.cluster_queue(cq)
    assert stored["spec"]["queueingStrategy"] == "StrictFIFO"
    flavor = stored["spec"]["resourceGroups"][0]["flavors"][0]
    assert flavor["name"] == f"{ns}-flavor"
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]} == {"cpu": "1", "memory": "8Gi"}
    assert kueue.local_queue(ns, "team")["spec"]["clusterQueue"] == cq
    wait(lambda: is_true(kueue.cluster_queue(cq), "Active"), 30, "pykueue to make the ClusterQueue active")

    kueue.apply(_workload_with_priority(ns, "first", 0))
    wait(lambda: _reserved(kueue, ns, "first"), 30, "the first Workload to be admitted")

    def cluster_queues() -> dict[str, dict[str, str]] | None:
        rows = _by_name(_table(_kueuectl(kueue.cluster, kueuectl_path, "list", "clusterqueue")))
        # The queue's status is written at most every 2 s (docs/kubernetes.md, Queue status).
        return rows if rows[cq]["ADMITTED WORKLOADS"] == "1" else None

    rows = wait(cluster_queues, 15, "kubectl kueue list clusterqueue to count the admitted Workload")
    assert rows[cq]["ACTIVE"] == "true"
    assert rows[cq]["PENDING WORKLOADS"] == "0"
    lq_rows = _by_name(_table(_kueuectl(kueue.cluster, kueuectl_path, "list", "localqueue", "-n", ns)))
    assert lq_rows["team"]["CLUSTERQUEUE"] == cq
    flavors = _table(_kueuectl(kueue.cluster, kueuectl_path, "list", "resourceflavor"))
    assert f"{ns}-flavor" in {row["NAME"] for row in flavors}


def test_list_workload_shows_each_pending_workloads_position_from_the_visibility_api(
    kueue: Kueue, kueuectl_path: str, queues_made_by_kueuectl: str, kube_namespace: str
) -> None:
    ns, cq = kube_namespace, queues_made_by_kueuectl
    kueue.apply(_workload_with_priority(ns, "first", 0))
    wait(lambda: _reserved(kueue, ns, "first"), 30, "the first Workload to be admitted")
    kueue.apply(_workload_with_priority(ns, "low", 0))
    kueue.apply(_workload_with_priority(ns, "high", 100))

    def listed() -> dict[str, dict[str, str]] | None:
        rows = _by_name(_table(_kueuectl(kueue.cluster, kueuectl_path, "list", "workload", "-n", ns)))
        positions = {name: rows[name]["POSITION IN QUEUE"] for name in ("low", "high") if name in rows}
        return rows if positions == {"high": "0", "low": "1"} else None

    rows = wait(listed, 30, "kubectl kueue list workload to show both positions")
    assert rows["first"]["POSITION IN QUEUE"] == ""
    assert rows["first"]["CLUSTERQUEUE"] == cq
    assert rows["high"]["LOCALQUEUE"] == "team"
    assert rows["high"]["STATUS"] == "PENDING"
    assert rows["first"]["STATUS"] == "ADMITTED"


def test_stop_and_resume_move_workloads_and_queues_as_upstream(
    kueue: Kueue, kueuectl_path: str, queues_made_by_kueuectl: str, kube_namespace: str
) -> None:
    ns, cq = kube_namespace, queues_made_by_kueuectl
    kueue.apply(_workload_with_priority(ns, "first", 0))
    wait(lambda: _reserved(kueue, ns, "first"), 30, "the first Workload to be admitted")
    kueue.apply(_workload_with_priority(ns, "second", 0))

    def workload(name: str) -> dict[str, Any]:
        found: dict[str, Any] = kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads/{name}")
        return found

    # Stopping a running Workload deactivates it; pykueue evicts it and admits the next one.
    _kueuectl(kueue.cluster, kueuectl_path, "stop", "workload", "first", "-n", ns)
    assert workload("first")["spec"]["active"] is False
    wait(lambda: _reserved(kueue, ns, "second"), 30, "the second Workload to take the freed quota")
    assert not _reserved(kueue, ns, "first")
    _kueuectl(kueue.cluster, kueuectl_path, "resume", "workload", "first", "-n", ns)
    assert workload("first")["spec"]["active"] is True

    # Stopping the ClusterQueue (HoldAndDrain unless --keep-already-running) evicts what runs there.
    _kueuectl(kueue.cluster, kueuectl_path, "stop", "clusterqueue", cq)
    assert kueue.cluster_queue(cq)["spec"]["stopPolicy"] == "HoldAndDrain"
    wait(lambda: not _reserved(kueue, ns, "second"), 30, "the stopped ClusterQueue to evict its Workload")
    active = wait(
        lambda: (
            condition(kueue.cluster_queue(cq), "Active")
            if not is_true(kueue.cluster_queue(cq), "Active")
            else None
        ),
        30,
        "the stopped ClusterQueue to say it is inactive",
    )
    assert active["reason"] == "Stopped"
    _kueuectl(kueue.cluster, kueuectl_path, "resume", "clusterqueue", cq)
    assert kueue.cluster_queue(cq)["spec"]["stopPolicy"] == "None"
    wait(
        lambda: _reserved(kueue, ns, "first") or _reserved(kueue, ns, "second"),
        30,
        "admission after resuming",
    )

    # A LocalQueue stopped with --keep-already-running holds new admissions, keeps the running one.
    _kueuectl(kueue.cluster, kueuectl_path, "stop", "localqueue", "team", "-n", ns, "--keep-already-running")
    assert kueue.local_queue(ns, "team")["spec"]["stopPolicy"] == "Hold"
    running = "first" if _reserved(kueue, ns, "first") else "second"
    _kueuectl(kueue.cluster, kueuectl_path, "resume", "localqueue", "team", "-n", ns)
    assert kueue.local_queue(ns, "team")["spec"]["stopPolicy"] == "None"
    assert _reserved(kueue, ns, running)
