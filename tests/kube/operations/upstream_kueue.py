"""Upstream Kueue's own controller manager (sigs.k8s.io/kueue/cmd/kueue, built by hack/kueue-manager)
run against the test control plane, outside the cluster.

It runs as its Deployment does but for what only a cluster gives: its kubeconfig is the test's, its
webhook, health and metrics ports are on loopback, leader election is off (one replica at a time),
and the visibility server is off (it writes its certificate under ``/visibility``). Internal
certificate management stays on (without it the manager wants a metrics certificate under
``/etc/kueue``): it writes the webhook certificate to a Secret and the CA into the CRDs' conversion
``clientConfig``, then waits for the Secret's files in its certificate folder; the kubelet mounts
them in a pod, `UpstreamKueue.wait_ready` copies them here. No webhook configuration is registered, so the API
server never calls it: Jobs are created suspended with the queue-name label.
"""

from __future__ import annotations

import base64
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from ..controller.conftest import wait
from ..controlplane import KubeCluster, free_ports

# Upstream's defaults for the names its certificate management uses (apis/config/v1beta2).
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"


def configuration(namespace: str, cert_dir: Path, webhook_port: int, health_port: int) -> dict[str, Any]:
    """upstream's config/components/manager/controller_manager_config.yaml, for a process on loopback."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": WEBHOOK_SERVICE,
            "webhookSecretName": WEBHOOK_SECRET,
        },
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": ["batch/job"]},
    }


class UpstreamKueue:
    """One run of upstream's manager; `stop` sends SIGTERM as the kubelet would."""

    def __init__(self, binary: Path, cluster: KubeCluster, namespace: str, directory: Path, run: int) -> None:
        self.cluster, self.namespace = cluster, namespace
        webhook_port, self.health_port = free_ports(2)
        self.cert_dir = directory / f"upstream-certs-{run}"
        self.cert_dir.mkdir()
        config = directory / f"upstream-config-{run}.yaml"
        config.write_text(
            yaml.safe_dump(configuration(namespace, self.cert_dir, webhook_port, self.health_port))
        )
        self.log_path = directory / f"upstream-kueue-{run}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [
                str(binary),
                "--config",
                str(config),
                "--kubeconfig",
                str(cluster.kubeconfig),
                "--feature-gates",
                "VisibilityOnDemand=false",
                "--zap-log-level",
                "2",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text()

    def _mount_certificate(self) -> None:
        """What the kubelet does with the Secret's volume: its keys as files, once it has them."""
        if (self.cert_dir / "tls.crt").exists():
            return
        data = (
            self.cluster.get(f"/api/v1/namespaces/{self.namespace}/secrets/{WEBHOOK_SECRET}").get("data")
            or {}
        )
        if "tls.crt" in data and "tls.key" in data:
            for name, value in data.items():
                (self.cert_dir / name).write_bytes(base64.b64decode(value))

    def wait_ready(self, timeout: float = 120) -> None:
        """Its /readyz answers once the certificates are in place and the manager runs."""

        def ready() -> bool:
            assert self.process.poll() is None, f"upstream Kueue exited:\n{self.log()[-4000:]}"
            self._mount_certificate()
            try:
                url = f"http://127.0.0.1:{self.health_port}/readyz"
                with urllib.request.urlopen(url, timeout=5) as response:
                    return bool(response.status == 200)
            except (OSError, urllib.error.HTTPError):
                return False

        wait(ready, timeout, "upstream Kueue's /readyz", interval=0.5)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()
        return self.process.returncode
