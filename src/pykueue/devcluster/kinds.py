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
import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pykueue.devcluster.controlplane import REPO_ROOT, KubeCluster
from pykueue.devcluster.processes import ControlPlaneError, free_ports, wait_for

BUILD_SCRIPT = REPO_ROOT / "hack" / "kind-controllers"


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


def module_file(name: str, path: str) -> str:
    """A file of the controller's Go module at the pinned version (the Go module cache, downloaded when missing)."""
    listing = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--list"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    wanted = next((line.split()[1] for line in listing if line.split()[0] == name), None)
    if wanted is None:
        raise ControlPlaneError(f"hack/kind-controllers has no controller {name}")
    out = subprocess.run(
        ["go", "mod", "download", "-json", wanted], capture_output=True, text=True, timeout=600
    )
    if out.returncode != 0:
        raise ControlPlaneError(f"go mod download {wanted} failed: {out.stdout}{out.stderr}")
    return (Path(json.loads(out.stdout)["Dir"]) / path).read_text()


@dataclass(frozen=True)
class Spec:
    """How to run one controller.

    ``config`` (when not empty) is written to a file, passed as ``--config`` or put in a
    ConfigMap (``config_map``); it and ``args`` may use {kubeconfig}, {webhook_port},
    {health_port}, {cert_dir} and {config}. ``ready`` is how to tell it is running: its
    ``/readyz`` on the health port, or (``lease:<namespace>``) a held Lease there.
    ``pod_webhooks`` keeps the module's Pod webhooks with that objectSelector (the LWS
    controller labels its pods in one); without it they are left out.
    """

    name: str
    config: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    namespaces: tuple[str, ...] = ()
    secrets: tuple[tuple[str, str], ...] = ()
    config_map: tuple[str, str, str] | None = None
    ready: str = "readyz"
    pod_webhooks: dict[str, Any] | None = None
    # Where under {cert_dir} the serving certificate goes (controller-runtime's default
    # folder is <TMPDIR>/k8s-webhook-server/serving-certs for managers without a setting).
    cert_subdir: str = ""
    # A folder the binary hard-codes and only waits to find a certificate in (it expects a
    # Secret mounted there): a certificate is put there when there is none.
    fixed_cert_dir: str = ""
    # False: the module's webhooks are not registered (the controller does not serve them here).
    webhooks: bool = True


_CONTROLLER_RUNTIME_CONFIG = """\
kind: Configuration
internalCertManagement: {{enable: false}}
leaderElection: {{leaderElect: false}}
webhook: {{host: 127.0.0.1, port: {webhook_port}, certDir: {cert_dir}}}
metrics: {{bindAddress: "0"}}
health: {{healthProbeBindAddress: "127.0.0.1:{health_port}"}}
"""

JOBSET = Spec(
    name="jobset",
    config="apiVersion: config.jobset.x-k8s.io/v1alpha1\n" + _CONTROLLER_RUNTIME_CONFIG,
    args=("--config={config}",),
)
LWS = Spec(
    name="lws",
    config="apiVersion: config.lws.x-k8s.io/v1alpha1\n" + _CONTROLLER_RUNTIME_CONFIG,
    args=("--config={config}", "--leader-elect=false"),
    pod_webhooks={"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]},
)
# KubeRay asks a Ray head's dashboard whether a RayJob's job ended; through the API server's
# service proxy (--use-kubernetes-proxy) that works from outside the cluster's network, as
# this controller runs, wherever the head's pod really answers.
KUBERAY = Spec(
    name="kuberay",
    args=(
        "--metrics-addr=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:{health_port}",
        "--enable-leader-election=false",
        "--use-kubernetes-proxy",
    ),
)
# Its webhooks only validate; their certificate (made by cert-controller for an in-cluster
# Service name) cannot be called by URL on 127.0.0.1, so they are not registered.
TRAINING_OPERATOR = Spec(
    name="training-operator",
    args=(
        "--metrics-bind-address=0",
        "--health-probe-bind-address=127.0.0.1:{health_port}",
        "--webhook-server-port={webhook_port}",
        "--enable-scheme=pytorchjob",
        "--enable-scheme=tfjob",
        "--enable-scheme=paddlejob",
        "--enable-scheme=xgboostjob",
        "--enable-scheme=jaxjob",
    ),
    env=(("MY_POD_NAMESPACE", "kubeflow"),),
    namespaces=("kubeflow",),
    secrets=(("kubeflow", "training-operator-webhook-cert"),),
    # Its cert-controller is ready only once tls.crt exists in this folder (pkg/cert/cert.go).
    fixed_cert_dir="/tmp/k8s-webhook-server/serving-certs",
)
MPI_OPERATOR = Spec(
    name="mpi-operator",
    args=("--kubeConfig={kubeconfig}", "--lock-namespace=mpi-operator"),
    namespaces=("mpi-operator",),
    ready="lease:mpi-operator",
)
# Without webhooks (their certificate is for an in-cluster Service): the AppWrappers the
# tests submit name their pod sets, as upstream's Deployment sample does.
APPWRAPPER = Spec(
    name="appwrapper",
    config="""\
controllerManager:
  metrics: {{bindAddress: "0"}}
  health: {{bindAddress: "127.0.0.1:{health_port}"}}
  leaderElection: false
webhooksEnabled: false
""",
    env=(("NAMESPACE", "appwrapper-system"),),
    namespaces=("appwrapper-system",),
    config_map=("appwrapper-system", "appwrapper-operator-config", "config.yaml"),
    webhooks=False,
)


# Kubeflow Trainer v2: its own certificate management off; its webhook server reads the test
# certificate from controller-runtime's default folder under TMPDIR. It needs the JobSet
# controller (a TrainJob runs as a JobSet).
TRAINER = Spec(
    name="trainer",
    config="""\
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
certManagement: {{enable: false}}
leaderElection: {{leaderElect: false}}
webhook: {{host: 127.0.0.1, port: {webhook_port}}}
metrics: {{bindAddress: "0"}}
health: {{healthProbeBindAddress: "127.0.0.1:{health_port}"}}
""",
    args=("--config={config}",),
    env=(("TMPDIR", "{cert_dir}"),),
    cert_subdir="k8s-webhook-server/serving-certs",
)


def _webhook_configurations(
    path: Path, name: str, url: str, ca_bundle: str, pod_selector: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The module's webhook configurations, renamed, pointed at ``url``; Pod webhooks only with a selector."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    out = []
    for doc in docs:
        hooks = []
        for hook in doc.get("webhooks") or []:
            resources = {r for rule in hook.get("rules") or [] for r in rule.get("resources") or []}
            if "pods" in resources:
                if pod_selector is None:
                    continue
                hook["objectSelector"] = pod_selector
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
    for namespace in spec.namespaces:
        if cluster.get_or_none(f"/api/v1/namespaces/{namespace}") is None:
            cluster.create_namespace(namespace)
    for namespace, secret in spec.secrets:
        if cluster.get_or_none(f"/api/v1/namespaces/{namespace}/secrets/{secret}") is None:
            cluster.create(f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": secret}})
    assert cluster.creds is not None
    cert_dir = cluster.workdir / f"{spec.name}-certs"
    serving = cert_dir / spec.cert_subdir
    serving.mkdir(parents=True, exist_ok=True)
    (serving / "tls.crt").write_bytes(cluster.creds.serving_cert.read_bytes())
    (serving / "tls.key").write_bytes(cluster.creds.serving_key.read_bytes())
    if spec.fixed_cert_dir:
        _ensure_certificate(Path(spec.fixed_cert_dir), serving)
    webhook_port, health_port = free_ports(2)
    config = cluster.workdir / f"{spec.name}-config.yaml"
    values = {
        "kubeconfig": cluster.kubeconfig,
        "webhook_port": webhook_port,
        "health_port": health_port,
        "cert_dir": cert_dir,
        "config": config,
    }
    text = spec.config.format(**values)
    config.write_text(text)
    if spec.config_map is not None:
        namespace, name, key = spec.config_map
        cluster.delete(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        cluster.create(
            f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": name}, "data": {key: text}}
        )
    env = [f"{k}={v.format(**values)}" for k, v in spec.env]
    argv = [
        *(["env", *env] if env else []),
        str(folder / "manager"),
        f"--kubeconfig={cluster.kubeconfig}",
        *(arg.format(**values) for arg in spec.args),
    ]
    if any(a.startswith("--kubeConfig=") for a in argv):
        argv = [a for a in argv if not a.startswith("--kubeconfig=")]
    proc = cluster._spawn(spec.name, argv)
    if spec.ready.startswith("lease:"):
        namespace = spec.ready.partition(":")[2]
        probe = lambda: _lease_held(cluster, namespace)  # noqa: E731
    else:
        probe = lambda: _ready(health_port)  # noqa: E731
    wait_for(probe, timeout=timeout, what=f"{spec.name} controller ready", watch=[proc])
    webhooks = folder / "webhooks.yaml"
    if spec.webhooks and webhooks.exists():
        ca = base64.b64encode(cluster.creds.ca_cert.read_bytes()).decode()
        url = f"https://127.0.0.1:{webhook_port}"
        for doc in _webhook_configurations(webhooks, spec.name, url, ca, spec.pod_webhooks):
            cluster.kubectl(
                "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(doc)
            )
    return folder


def _ensure_certificate(folder: Path, source: Path) -> None:
    """A certificate and key in ``folder`` (shared by every run on the machine): left as found
    when present, else copied from ``source`` by rename, so a reader never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tls.key", "tls.crt"):  # the key first: readers look for the certificate
        target = folder / name
        if target.exists():
            continue
        temporary = folder / f".{name}.{os.getpid()}"
        temporary.write_bytes((source / name).read_bytes())
        os.replace(temporary, target)


def stop(cluster: KubeCluster, spec: Spec) -> None:
    """Stop the controller and remove the webhooks that point at it."""
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for item in cluster.get(f"/apis/admissionregistration.k8s.io/v1/{kind}")["items"]:
            if item["metadata"]["name"].startswith(f"{spec.name}-"):
                cluster.delete(f"/apis/admissionregistration.k8s.io/v1/{kind}/{item['metadata']['name']}")
    cluster.stop_components(spec.name)


def _lease_held(cluster: KubeCluster, namespace: str) -> bool:
    leases = cluster.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases")["items"]
    return any((lease.get("spec") or {}).get("holderIdentity") for lease in leases)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


# The kinds' controllers a local cluster can run, by the name `hack/kind-controllers` builds
# them under, with the pykueue frameworks each one serves.
BY_NAME: dict[str, tuple[Spec, tuple[str, ...]]] = {
    "jobset": (JOBSET, ("jobset.x-k8s.io/jobset",)),
    "lws": (LWS, ("leaderworkerset.x-k8s.io/leaderworkerset",)),
    "kuberay": (KUBERAY, ("ray.io/rayjob", "ray.io/raycluster")),
    "training-operator": (
        TRAINING_OPERATOR,
        (
            "kubeflow.org/pytorchjob",
            "kubeflow.org/tfjob",
            "kubeflow.org/paddlejob",
            "kubeflow.org/xgboostjob",
            "kubeflow.org/jaxjob",
        ),
    ),
    "mpi-operator": (MPI_OPERATOR, ("kubeflow.org/mpijob",)),
    "appwrapper": (APPWRAPPER, ("workload.codeflare.dev/appwrapper",)),
    "trainer": (TRAINER, ("trainer.kubeflow.org/trainjob",)),
}
