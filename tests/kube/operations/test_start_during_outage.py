"""A controller started while its API server does not answer: its probes' ports answer meanwhile.

The Deployment's liveness probe is the webhook port's /healthz: a port that refuses connections
until the API server answers gets a pod that starts during an API outage restarted. Here the
controller's kubeconfig names a loopback port where nothing listens yet (the outage); a relay to
the real API server starts on it later (the API server comes back).
"""

from __future__ import annotations

import json
import select
import socket
import socketserver
import ssl
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..controller.conftest import wait
from ..controlplane import KubeCluster, free_port
from .conftest import Controllers


class Relay:
    """A TCP relay from a loopback port to the API server, in background threads."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        class Pipe(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with socket.create_connection(target) as upstream:
                    ends = {self.request: upstream, upstream: self.request}
                    while True:
                        readable, _, _ = select.select(list(ends), [], [], 30)
                        if not readable:
                            return
                        for end in readable:
                            data = end.recv(65536)
                            if not data:
                                return
                            ends[end].sendall(data)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Pipe)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="relay", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
    api_port, webhook_port = free_port(), free_port()
    kubeconfig = _kubeconfig_for(kwok_cluster, f"https://127.0.0.1:{api_port}", tmp_path / "kubeconfig")
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
    # Nothing listens at the API server's address yet: alive, not ready, on both ports.
    assert controller.http("/healthz")[0] == 200
    assert controller.http("/readyz")[0] == 503
    assert _get(f"{webhook}/readyz") == 503
    assert "cannot get the webhook certificate yet" in controller.log()

    api = kwok_cluster.server.rsplit(":", 1)
    relay = Relay(api_port, ("127.0.0.1", int(api[1])))
    try:
        wait(lambda: _get(f"{webhook}/readyz") == 200, 120, "the webhook port ready", describe=controller.log)
        wait(
            lambda: controller.http("/readyz")[0] == 200, 120, "the controller ready", describe=controller.log
        )
        assert controller.http("/healthz")[0] == 200
    finally:
        controller.stop()
        relay.stop()
