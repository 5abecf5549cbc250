"""The dashboard served read-only by `pykueue controller` on a real control plane, cut by RBAC.

An admin token (the cluster's) sees both namespaces' workloads; a ServiceAccount
allowed to read pending workloads in one namespace sees that namespace only, in
the JSON and on the page in headless Chromium; a token without any grant is refused.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from browsing.browser import Browser

from ..controller.conftest import KUEUE, Kueue, is_true, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import KubeCluster
from .conftest import Controllers
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
        assert all(w["cause"] in ("quota", "evaluating") and w["estimatedStart"] is None for w in pending)
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
