"""Policy history in Kubernetes mode: recorded from the watches, kept in ConfigMaps, rolled back."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from ..controlplane import KubeCluster
from .conftest import PYKUEUE, ControllerThread, Kueue, wait
from .test_job_integration import _cluster_queue, _flavor
from .test_lifecycle import _passes_after

NOMINAL = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


@pytest.fixture
def history_namespace(kwok_cluster: KubeCluster) -> Iterator[str]:
    name = f"pykueue-history-{secrets.token_hex(3)}"
    kwok_cluster.create_namespace(name)
    yield name
    kwok_cluster.delete(f"/api/v1/namespaces/{name}")


def policy(cluster: KubeCluster, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--kubeconfig", str(cluster.kubeconfig), "--controller-namespace", namespace]
    return subprocess.run([PYKUEUE, "policy", *args, *where], capture_output=True, text=True, timeout=120)


def history_of(cluster: KubeCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = policy(cluster, namespace, "history", "--name", name, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    rows: list[dict[str, Any]] = json.loads(listed.stdout)
    return rows


def nominal(kueue: Kueue, name: str) -> str:
    cq = kueue.cluster_queue(name)
    return str(cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])


def test_a_change_is_recorded_once_across_restarts_and_rolled_back(
    kwok_cluster: KubeCluster, kueue: Kueue, kueue_crds: list[str], history_namespace: str
) -> None:
    name = f"ph-{secrets.token_hex(3)}"
    kubeconfig = str(kwok_cluster.kubeconfig)
    # With the webhooks served by this controller, the validating webhook's request names the user.
    controller = ControllerThread(
        kubeconfig, webhook_namespace=history_namespace, policy_history_namespace=history_namespace
    ).start()
    try:
        kueue.apply(_flavor(f"{name}-flavor"))
        kueue.apply(_cluster_queue(name, f"{name}-flavor", "2"))
        wait(lambda: len(history_of(kwok_cluster, history_namespace, name)) == 1, 30, "the create recorded")
        kueue.apply(_cluster_queue(name, f"{name}-flavor", "1"))
        wait(lambda: len(history_of(kwok_cluster, history_namespace, name)) == 2, 30, "the update recorded")
    finally:
        controller.stop()
    created, changed = history_of(kwok_cluster, history_namespace, name)
    assert (created["operation"], changed["operation"]) == ("create", "update")
    review = kwok_cluster.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", {"metadata": {}})
    assert changed["who"] == f"{review['status']['userInfo']['username']} (admission request)"
    shown = policy(kwok_cluster, history_namespace, "show", str(changed["rev"]), "--format", "json")
    assert json.loads(shown.stdout)["diff"] == [f'  {NOMINAL}: "2" -> "1"']

    # A restart with nothing changed records nothing; a change made while down is recorded once.
    controller = ControllerThread(kubeconfig, policy_history_namespace=history_namespace).start()
    try:
        _passes_after(controller, 3)
        assert len(history_of(kwok_cluster, history_namespace, name)) == 2
    finally:
        controller.stop()
    kueue.apply(_cluster_queue(name, f"{name}-flavor", "3"))
    controller = ControllerThread(kubeconfig, policy_history_namespace=history_namespace).start()
    try:
        _passes_after(controller, 3)
        rows = history_of(kwok_cluster, history_namespace, name)
        assert [r["operation"] for r in rows] == ["create", "update", "update"]
        # Without webhooks (nobody served them meanwhile) the field manager is what is known.
        assert rows[2]["who"] == "kubectl (Apply)"
        while_down = policy(kwok_cluster, history_namespace, "show", str(rows[2]["rev"]), "--format", "json")
        assert json.loads(while_down.stdout)["diff"] == [f'  {NOMINAL}: "1" -> "3"']

        dry = policy(kwok_cluster, history_namespace, "rollback", str(created["rev"]), "--format", "json")
        assert dry.returncode == 0, dry.stderr
        plan = json.loads(dry.stdout)
        assert plan["applied"] is False
        assert [(o["name"], o["action"], o["diff"]) for o in plan["objects"]] == [
            (name, "restore", [f'  {NOMINAL}: "3" -> "2"'])
        ]
        assert nominal(kueue, name) == "3"

        applied = policy(kwok_cluster, history_namespace, "rollback", str(created["rev"]), "--apply")
        assert applied.returncode == 0, applied.stderr
        assert f"ClusterQueue/{name} restored" in applied.stdout
        assert nominal(kueue, name) == "2"
        wait(lambda: len(history_of(kwok_cluster, history_namespace, name)) == 4, 30, "the rollback recorded")
        last = history_of(kwok_cluster, history_namespace, name)[-1]
        assert (last["operation"], last["who"]) == ("update", "pykueue (Update)")
    finally:
        controller.stop()
    assert len(history_of(kwok_cluster, history_namespace, name)) == 4
    gone = policy(kwok_cluster, history_namespace, "rollback", "99999")
    assert gone.returncode == 1 and "policy revision 99999 not found" in gone.stderr
