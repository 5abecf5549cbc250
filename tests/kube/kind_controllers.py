"""The job kinds' own controllers (JobSet, ...) on the test control plane, built by hack/kind-controllers.

Each is a controller-runtime manager started as a process of the `KubeCluster`, with
the admin kubeconfig. Its CRDs come from its Go module (copied beside the binary by
the build script) and are applied first. Its admission webhooks (JobSet's defaulting
sets, e.g., the pods' ``restartPolicy``; without it the Jobs would be refused) are
registered by URL on 127.0.0.1, served with the API server's own test certificate
(valid for 127.0.0.1, signed by the test CA), so no cert-manager or in-cluster
Service is needed. Webhooks on Pods are left out: they would put every pod of the
session behind that controller.
"""

from __future__ import annotations

import base64
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .controlplane import ControlPlaneError, KubeCluster, free_ports, wait_for

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "kind-controllers"


def controllers_dir() -> Path:
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-dir"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def build(name: str) -> Path:
    """The controller's folder (``manager``, ``crds/``, ``webhooks.yaml``), built when missing."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT), name], capture_output=True, text=True, timeout=3000)
    if proc.returncode != 0:
        raise ControlPlaneError(f"hack/kind-controllers {name} failed:\n{proc.stderr[-3000:]}")
    matches = sorted(controllers_dir().glob(f"{name}-v*"))
    if not matches:
        raise ControlPlaneError(f"hack/kind-controllers built no {name}")
    return matches[-1]


@dataclass(frozen=True)
class Spec:
    """How to run one controller: its config file and the webhooks to register."""

    name: str
    config: str  # a format string with {webhook_port}, {health_port}, {cert_dir}
    args: tuple[str, ...] = ()


JOBSET = Spec(
    name="jobset",
    config="""\
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
internalCertManagement: {{enable: false}}
leaderElection: {{leaderElect: false}}
webhook: {{host: 127.0.0.1, port: {webhook_port}, certDir: {cert_dir}}}
metrics: {{bindAddress: "0"}}
health: {{healthProbeBindAddress: "127.0.0.1:{health_port}"}}
""",
)


def _webhook_configurations(path: Path, name: str, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's webhook configurations, renamed, pointed at ``url``, without Pod webhooks."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    out = []
    for doc in docs:
        hooks = []
        for hook in doc.get("webhooks") or []:
            resources = {r for rule in hook.get("rules") or [] for r in rule.get("resources") or []}
            if "pods" in resources:
                continue
            service = (hook.get("clientConfig") or {}).get("service") or {}
            hook["clientConfig"] = {"url": f"{url}{service.get('path', '')}", "caBundle": ca_bundle}
            hooks.append(hook)
        if hooks:
            doc["metadata"] = {"name": f"{name}-{doc['metadata']['name']}"}
            doc["webhooks"] = hooks
            out.append(doc)
    return out


def start(cluster: KubeCluster, spec: Spec, timeout: float = 120.0) -> Path:
    """Build (when missing), install the CRDs and webhooks of, and start one controller."""
    folder = build(spec.name)
    for crd in sorted((folder / "crds").glob("*.yaml")):
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    for crd in sorted((folder / "crds").glob("*.yaml")):
        name = yaml.safe_load(crd.read_text())["metadata"]["name"]
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    assert cluster.creds is not None
    cert_dir = cluster.workdir / f"{spec.name}-certs"
    cert_dir.mkdir(exist_ok=True)
    (cert_dir / "tls.crt").write_bytes(cluster.creds.serving_cert.read_bytes())
    (cert_dir / "tls.key").write_bytes(cluster.creds.serving_key.read_bytes())
    webhook_port, health_port = free_ports(2)
    config = cluster.workdir / f"{spec.name}-config.yaml"
    config.write_text(
        spec.config.format(webhook_port=webhook_port, health_port=health_port, cert_dir=cert_dir)
    )
    argv = [str(folder / "manager"), f"--kubeconfig={cluster.kubeconfig}", f"--config={config}", *spec.args]
    proc = cluster._spawn(spec.name, argv)
    wait_for(
        lambda: _ready(health_port),
        timeout=timeout,
        what=f"{spec.name} controller /readyz",
        watch=[proc],
    )
    webhooks = folder / "webhooks.yaml"
    if webhooks.exists():
        ca = base64.b64encode(cluster.creds.ca_cert.read_bytes()).decode()
        for doc in _webhook_configurations(webhooks, spec.name, f"https://127.0.0.1:{webhook_port}", ca):
            cluster.kubectl(
                "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(doc)
            )
    return folder


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
