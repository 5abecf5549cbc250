"""The dashboard on a real control plane: served by `pykueue controller`, and by `pykueue dashboard`.

An admin token (the cluster's) sees both namespaces' workloads; a ServiceAccount
allowed to read pending workloads in one namespace sees that namespace only, in
the JSON and on the page in headless Chromium; a token without any grant is refused.
`pykueue dashboard` follows the cluster without deciding or writing anything.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from browsing.browser import Browser

from ..controller.conftest import KUEUE, Kueue, is_true, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import KubeCluster, free_port
from .conftest import PYKUEUE, Controllers
from .test_metrics_and_visibility import tenant_token, workload


def test_a_namespace_reader_sees_its_own_workloads_and_causes_only(
    kwok_cluster: KubeCluster, kueue: Kueue, controllers: Controllers, kube_namespace: str
) -> None:
    ns, other = kube_namespace, f"other-{secrets.token_hex(3)}"
    kwok_cluster.create_namespace(other)
    cq = f"{ns}-cq"
    try:
        kueue.apply(_flavor(f"{ns}-flavor"))
        kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "1"))
        for namespace in (ns, other):
            kueue.apply(_local_queue(namespace, "queue", cq))
        for namespace, name in ((ns, "first"), (ns, "second"), (other, "theirs")):
            kwok_cluster.create(f"{KUEUE}/namespaces/{namespace}/workloads", workload(namespace, name))
        controller = controllers.start()
        controller.wait_running()

        def one_admitted() -> bool:
            items = [
                w
                for namespace in (ns, other)
                for w in kwok_cluster.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
            ]
            return sum(1 for w in items if is_true(w, "Admitted")) == 1

        wait(one_admitted, 30, "one workload admitted")

        def document(token: str) -> dict[str, Any]:
            status, body = controller.http("/api/v1/dashboard", token)
            assert status == 200, body
            answer: dict[str, Any] = json.loads(body)
            return answer

        admin = document(kwok_cluster.token)
        assert admin["identity"]["role"] == "admin"
        assert {(w["namespace"], w["name"]) for w in admin["workloads"]} >= {
            (ns, "first"),
            (ns, "second"),
            (other, "theirs"),
        }
        tenant = tenant_token(kwok_cluster, ns)
        seen = document(tenant)
        assert seen["identity"] == {"name": "namespace reader", "role": "tenant", "namespaces": [ns]}
        assert {w["namespace"] for w in seen["workloads"]} == {ns}
        assert [q["namespace"] for q in seen["localQueues"]] == [ns]
        assert [q["name"] for q in seen["clusterQueues"]] == [cq]
        pending = [w for w in seen["workloads"] if w["state"] == "Pending"]
        # The ClusterQueue holds one CPU: whichever of the three waits was tried and did not fit,
        # or waits untried behind one that was.
        assert pending and all(w["cause"] in ("quota", "evaluating") for w in pending)
        # The lease holder's estimator fills estimates in the background: none yet, or a whole one.
        assert all(
            w["estimatedStart"] is None or {"at", "low", "high", "basis"} <= set(w["estimatedStart"])
            for w in pending
        )
        # The object pages: the YAML the controller received from the API server, cut the same way.
        status, body = controller.http(f"/api/v1/dashboard/objects/Workload/{ns}/first", tenant)
        assert status == 200, body
        assert "name: first\n" in json.loads(body)["yaml"] and f"namespace: {ns}" in json.loads(body)["yaml"]
        assert controller.http(f"/api/v1/dashboard/objects/ClusterQueue/{cq}", tenant)[0] == 200
        assert controller.http(f"/api/v1/dashboard/objects/LocalQueue/{other}/queue", tenant)[0] == 404
        assert controller.http(f"/api/v1/dashboard/objects/Workload/{other}/theirs", tenant)[0] == 404
        assert (
            controller.http(f"/api/v1/dashboard/objects/Workload/{other}/theirs", kwok_cluster.token)[0]
            == 200
        )
        assert controller.http("/api/v1/dashboard")[0] == 401
        nobody = tenant_token(kwok_cluster, other)
        kwok_cluster.delete(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{other}/rolebindings/pending-reader"
        )
        assert controller.http("/api/v1/dashboard", nobody)[0] == 403

        with Browser() as browser:
            browser.load(f"http://127.0.0.1:{controller.port}/dashboard#token={tenant}", 1280, 900, False)
            names = browser.wait_for(
                "(() => { const rows = [...document.querySelectorAll('tr.workload')];"
                " return rows.length ? rows.map((r) => r.dataset.workload) : null; })()"
            )
            assert sorted(names) == sorted(f"{ns}/{w['name']}" for w in seen["workloads"])
            assert browser.evaluate(f"!!document.querySelector('[data-cluster-queue=\"{cq}\"]')")
    finally:
        kwok_cluster.delete(f"/api/v1/namespaces/{other}")


def test_pykueue_dashboard_follows_a_cluster_without_writing_to_it(
    kwok_cluster: KubeCluster, kueue: Kueue, controllers: Controllers, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    cq = f"{ns}-cq"
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "1"))
    kueue.apply(_local_queue(ns, "queue", cq))
    for name in ("first", "second"):
        wl = workload(ns, name)
        # A declared limit gives the estimator something to go on: nothing has finished on this
        # cluster, and without it the waiting one's start is unknown and no annotation is written.
        wl["spec"]["maximumExecutionTimeSeconds"] = 600
        kwok_cluster.create(f"{KUEUE}/namespaces/{ns}/workloads", wl)
    port = free_port()
    log = (tmp_path / "dashboard.log").open("w")
    viewer = subprocess.Popen(
        [PYKUEUE, "dashboard", "--kubeconfig", str(kwok_cluster.kubeconfig), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def document() -> dict[str, Any] | None:
            assert viewer.poll() is None, (tmp_path / "dashboard.log").read_text()
            try:
                with urllib.request.urlopen(
                    urllib.request.Request(
                        f"http://127.0.0.1:{port}/api/v1/dashboard",
                        headers={"Authorization": f"Bearer {kwok_cluster.token}"},
                    ),
                    timeout=10,
                ) as response:
                    answer: dict[str, Any] = json.loads(response.read())
                    return answer
            except (urllib.error.URLError, ConnectionError):
                return None

        def states() -> dict[str, str]:
            answer = document() or {"workloads": []}
            return {w["name"]: w["state"] for w in answer["workloads"] if w["namespace"] == ns}

        # No controller yet: the view shows both waiting, untried, and decides nothing itself.
        assert wait(lambda: states() == {"first": "Pending", "second": "Pending"}, 30, "both pending")
        shown = document()
        assert shown is not None and [q["name"] for q in shown["clusterQueues"]] == [cq]
        causes = {w["name"]: w["cause"] for w in shown["workloads"] if w["namespace"] == ns}
        assert causes == {"first": "evaluating", "second": "evaluating"}
        stored = kwok_cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
        assert all(not (w.get("status") or {}).get("admission") for w in stored)

        # The controller admits one: the view follows, and says why the other waits.
        controllers.start().wait_running()
        wait(lambda: sorted(states().values()) == ["Admitted", "Pending"], 30, "one admitted in the view")
        waiting = wait(
            lambda: next(
                (w for w in (document() or {"workloads": []})["workloads"] if w["cause"] == "quota"), None
            ),
            30,
            "the waiting one's cause",
        )
        assert waiting["namespace"] == ns and waiting["reason"] and waiting["position"] == 1

        # Its estimated start is the one the controller's estimator wrote on the Workload.
        def estimated() -> dict[str, str] | None:
            rows = (document() or {"workloads": []})["workloads"]
            found = next((w for w in rows if w["name"] == waiting["name"] and w["namespace"] == ns), None)
            return None if found is None else found["estimatedStart"]

        shown_estimate = wait(estimated, 60, "the waiting one's estimated start")
        stored_wl = kwok_cluster.get(f"{KUEUE}/namespaces/{ns}/workloads/{waiting['name']}")
        annotation = json.loads(stored_wl["metadata"]["annotations"]["pykueue.io/estimated-start"])
        assert shown_estimate == annotation
        assert set(shown_estimate) == {"at", "low", "high", "basis"}
    finally:
        viewer.send_signal(signal.SIGTERM)
        try:
            viewer.wait(20)
        except subprocess.TimeoutExpired:
            viewer.kill()
            viewer.wait()
        log.close()
