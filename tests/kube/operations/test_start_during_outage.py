"""A controller started while its API server does not answer: its probes' ports answer meanwhile.

The Deployment's liveness probe is the webhook port's /healthz: a port that refuses connections
until the API server answers gets a pod that starts during an API outage restarted. Here the
controller's kubeconfig names a loopback port where nothing listens yet (the outage); it forwards
to the real API server later (the API server comes back).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ..controller.conftest import wait
from ..controller.test_drop_in import _Forwarder
from ..controlplane import KubeCluster, free_port
from .conftest import Controllers


def _get(url: str) -> int:
    # The kubelet checks no certificate for an HTTPS probe; neither does this.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


def _kubeconfig_for(cluster: KubeCluster, server: str, path: Path) -> Path:
    doc: dict[str, Any] = json.loads(cluster.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["server"] = server
    path.write_text(json.dumps(doc))
    return path


def test_probes_answer_while_the_api_server_is_down_and_ready_once_it_is_up(
    kwok_cluster: KubeCluster, controllers: Controllers, kube_namespace: str, tmp_path: Path
) -> None:
    api = urllib.parse.urlsplit(kwok_cluster.server)
    forwarder = _Forwarder((api.hostname or "127.0.0.1", api.port or 443))
    webhook_port = free_port()
    kubeconfig = _kubeconfig_for(kwok_cluster, f"https://127.0.0.1:{forwarder.port}", tmp_path / "kubeconfig")
    controller = controllers.start(
        "--webhooks",
        "--webhook-port",
        str(webhook_port),
        "--lease-namespace",
        kube_namespace,
        kubeconfig=kubeconfig,
        env={"POD_NAMESPACE": kube_namespace},
    )
    webhook = f"https://127.0.0.1:{webhook_port}"
    controller.wait_serving()

    def webhook_port_answers() -> bool:
        assert controller.process.poll() is None, controller.log()
        try:
            return _get(f"{webhook}/healthz") == 200
        except OSError:
            return False

    wait(webhook_port_answers, 30, "the webhook port's /healthz")
    wait(lambda: "cannot get the webhook certificate yet" in controller.log(), 30, "a refused connection")
    # Nothing listens at the API server's address yet: alive, not ready, on both ports.
    assert controller.http("/healthz")[0] == 200
    assert controller.http("/readyz")[0] == 503
    assert _get(f"{webhook}/readyz") == 503

    forwarder.open()
    try:
        wait(lambda: _get(f"{webhook}/readyz") == 200, 120, "the webhook port ready", describe=controller.log)
        wait(
            lambda: controller.http("/readyz")[0] == 200, 120, "the controller ready", describe=controller.log
        )
        assert controller.http("/healthz")[0] == 200
    finally:
        controller.stop()
        forwarder.close()
