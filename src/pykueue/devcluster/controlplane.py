"""A real Kubernetes control plane on loopback, for the tests that need one.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as child processes,
each in its own process group, built beforehand by ``hack/kube-binaries``. Credentials (a CA, the
apiserver's serving certificate, an admin client certificate, a bearer token and the
service-account signing key) are generated at start with the ``openssl`` command line tool.

The kube tests' pytest fixtures (tests/kube/conftest.py) and ``pykueue dev-cluster`` both start
their control plane with this module; it uses the standard library only. The child processes
and waiting for them are in `processes`, the certificates and the kubeconfig in `credentials`.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pykueue.devcluster.credentials import Credentials, make_credentials, write_kubeconfig
from pykueue.devcluster.processes import ControlPlaneError, Process, free_port, free_ports, wait_for

# The build scripts live in the checkout (src/pykueue/devcluster/ -> the repository root).
REPO_ROOT = Path(__file__).resolve().parents[3]
KUBE_BINARIES_SCRIPT = REPO_ROOT / "hack" / "kube-binaries"
KWOK_STAGES = Path(__file__).resolve().parent / "kwok-stages.yaml"
BIN_DIR_ENV = "PYKUEUE_KUBE_BIN"
REQUIRED_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
# Annotation with which kwok recognises the nodes it manages (see kwok-stages.yaml).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Taints that the node lifecycle controller keeps on nodes that are not (yet) Ready.
NODE_CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


class ApiError(ControlPlaneError):
    """The apiserver answered with an HTTP error status."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path} -> HTTP {status}: {message}")
        self.status = status
        self.body = body


# --------------------------------------------------------------------------------------------
# Binaries


def find_bin_dir() -> Path:
    """The folder holding the control plane's binaries, or ControlPlaneError telling how to build it.

    ``$PYKUEUE_KUBE_BIN`` wins (the Makefile exports it); otherwise ``hack/kube-binaries --print-dir``
    names the cache folder for the pinned versions.
    """
    configured = os.environ.get(BIN_DIR_ENV)
    if configured:
        bin_dir = Path(configured)
    else:
        try:
            out = subprocess.run(
                ["bash", str(KUBE_BINARIES_SCRIPT), "--print-dir"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise ControlPlaneError(f"could not run {KUBE_BINARIES_SCRIPT} --print-dir: {exc}") from exc
        bin_dir = Path(out.strip().splitlines()[-1])
    missing = [name for name in REQUIRED_BINARIES if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise ControlPlaneError(
            f"the Kubernetes test binaries {', '.join(missing)} are missing from {bin_dir}. "
            "Run `make kube-binaries` first (it builds them from Go modules and caches them; "
            f"the first build takes a long while), or point ${BIN_DIR_ENV} at a folder that has them."
        )
    return bin_dir


# --------------------------------------------------------------------------------------------
# The cluster


@dataclass
class NodeSpec:
    """A fake node for kwok to run: its labels, taints and capacity."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: list[Mapping[str, str]] = field(default_factory=list)
    capacity: Mapping[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        capacity = {"cpu": "8", "memory": "32Gi", "pods": "110", **self.capacity}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **self.labels,
                },
                "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"taints": [dict(t) for t in self.taints]},
            "status": {"capacity": capacity, "allocatable": capacity},
        }


class KubeCluster:
    """etcd + kube-apiserver, and on demand the controller-manager, the scheduler and kwok."""

    def __init__(self, bin_dir: Path, workdir: Path) -> None:
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.logs_dir = workdir / "logs"
        self.processes: dict[str, Process] = {}
        self.ports: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self.creds: Credentials | None = None
        self.server = ""
        self.kubeconfig = workdir / "kubeconfig"
        self._ssl: ssl.SSLContext | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = Process(name, argv, self.logs_dir / f"{name}.log").start()
        self.processes[name] = proc
        return proc

    def start_apiserver(
        self, timeout: float = 120.0, profiling: bool = False, extra_flags: Iterable[str] = ()
    ) -> None:
        """Start etcd and kube-apiserver and wait until /readyz answers ok.

        ``profiling`` serves Go's /debug/pprof on the apiserver (the cluster benchmark's
        ``--profile-apiserver`` reads a CPU profile from it). ``extra_flags`` go to the
        apiserver after its own (the upstream benchmark sets the in-flight limits that
        upstream's runner gives its control plane).
        """
        begin = time.monotonic()
        self.creds = creds = make_credentials(self.workdir / "pki", KUBERNETES_SERVICE_IP)
        self.timings["credentials"] = time.monotonic() - begin

        client_port, peer_port = free_ports(2)
        etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd = self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=pykueue",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=pykueue={peer_url}",
                "--initial-cluster-state=new",
                # Test data need not survive a crash; skipping fsync makes etcd much faster.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        wait_for(
            lambda: _http_json(f"{etcd_url}/health").get("health") == "true",
            timeout=timeout,
            what="etcd /health",
            watch=[etcd],
        )
        self.timings["etcd"] = time.monotonic() - begin

        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={creds.serving_cert}",
                f"--tls-private-key-file={creds.serving_key}",
                f"--client-ca-file={creds.ca_cert}",
                f"--token-auth-file={creds.token_file}",
                # Front proxy, so that aggregated API servers can authenticate the apiserver.
                f"--requestheader-client-ca-file={creds.ca_cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={creds.front_proxy_cert}",
                f"--proxy-client-key-file={creds.front_proxy_key}",
                # An APIService's Service is reached at its endpoints: there is no kube-proxy
                # here to route its cluster IP.
                "--enable-aggregator-routing=true",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={creds.sa_pub}",
                f"--service-account-signing-key-file={creds.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                # Endpoints may not hold a loopback address, and nothing here reaches the
                # apiserver through the `kubernetes` Service anyway.
                "--endpoint-reconciler-type=none",
                f"--profiling={'true' if profiling else 'false'}",
                "--v=1",
                *extra_flags,
            ],
        )
        write_kubeconfig(self.kubeconfig, self.server, creds)
        wait_for(
            lambda: self._readyz(),
            timeout=timeout,
            what="kube-apiserver /readyz",
            watch=[etcd, apiserver],
        )
        self.timings["kube-apiserver"] = time.monotonic() - begin

    def _readyz(self) -> bool:
        try:
            return bool(self.request("GET", "/readyz", raw=True) == "ok")
        except ApiError:
            return False

    def _component_flags(self, name: str) -> list[str]:
        port = free_port()
        self.ports[name] = port
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            "--leader-elect=false",
            "--v=1",
        ]

    def _wait_healthz(self, name: str, timeout: float) -> None:
        """Wait for a component's own /healthz (served over TLS with a self-signed cert)."""
        url = f"https://127.0.0.1:{self.ports[name]}/healthz"
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        wait_for(
            lambda: _http_text(url, context=insecure) == "ok",
            timeout=timeout,
            what=f"{name} /healthz",
            watch=[self.processes[name]],
        )

    def start_controllers(
        self, timeout: float = 120.0, controllers: str = "*", scheduler: bool = True
    ) -> None:
        """Start kube-controller-manager (``controllers``: its ``--controllers``) and, unless
        told not to, kube-scheduler; wait for them to be healthy.

        ``controllers`` must include ``serviceaccount``, which the start waits for."""
        assert self.creds is not None, "start_apiserver() first"
        begin = time.monotonic()
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                *self._component_flags("kube-controller-manager"),
                f"--controllers={controllers}",
                f"--service-account-private-key-file={self.creds.sa_key}",
                f"--root-ca-file={self.creds.ca_cert}",
                "--use-service-account-credentials=false",
                "--cluster-name=pykueue-test",
            ],
        )
        if scheduler:
            self._spawn(
                "kube-scheduler",
                [str(self.bin_dir / "kube-scheduler"), *self._component_flags("kube-scheduler")],
            )
        self._wait_healthz("kube-controller-manager", timeout)
        if scheduler:
            self._wait_healthz("kube-scheduler", timeout)
        # The service-account controller runs: namespaces get their `default` ServiceAccount,
        # which pods need before the ServiceAccount admission plugin lets them in.
        wait_for(
            lambda: self.get_or_none("/api/v1/namespaces/default/serviceaccounts/default"),
            timeout=timeout,
            what="the default ServiceAccount of namespace default",
            watch=[self.processes["kube-controller-manager"]],
        )
        self.timings["controllers"] = time.monotonic() - begin

    def start_kwok(self, timeout: float = 60.0, stages: Path = KWOK_STAGES) -> None:
        """Start kwok, which runs every node annotated kwok.x-k8s.io/node=fake and its pods."""
        begin = time.monotonic()
        port = free_port()
        self.ports["kwok"] = port
        kwok = self._spawn(
            "kwok",
            [
                str(self.bin_dir / "kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--cidr=10.244.0.1/16",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{port}",
            ],
        )
        wait_for(
            lambda: _http_text(f"http://127.0.0.1:{port}/healthz") == "ok",
            timeout=timeout,
            what="kwok /healthz",
            watch=[kwok],
        )
        self.timings["kwok"] = time.monotonic() - begin

    def stop(self) -> None:
        """Stop every component, the most recently started first."""
        for proc in reversed(list(self.processes.values())):
            proc.stop()

    def stop_components(self, *names: str) -> None:
        """Stop the named components (in the order given) and forget them."""
        for name in names:
            proc = self.processes.pop(name, None)
            if proc is not None:
                proc.stop()

    def running(self, name: str) -> bool:
        proc = self.processes.get(name)
        return proc is not None and proc.running()

    def exited(self) -> list[Process]:
        """The components (kind controllers included) that have exited, in the order they started."""
        return [proc for proc in self.processes.values() if proc.exited()]

    # -- talking to the apiserver ------------------------------------------------------------

    @property
    def token(self) -> str:
        assert self.creds is not None
        return self.creds.token

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            assert self.creds is not None
            self._ssl = ssl.create_default_context(cafile=str(self.creds.ca_cert))
        return self._ssl

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        raw: bool = False,
        timeout: float = 30.0,
    ) -> Any:
        """One call to the apiserver with the admin token; JSON in and out (or text with raw)."""
        data = None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self._ssl_context(), timeout=timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            payload = exc.read().decode(errors="replace")
            try:
                parsed: Any = json.loads(payload)
            except ValueError:
                parsed = payload
            raise ApiError(method, path, exc.code, parsed) from None
        if raw:
            return text
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return self.request("POST", path, dict(body))

    def delete(self, path: str, *, missing_ok: bool = True) -> Any:
        try:
            return self.request("DELETE", path, {"propagationPolicy": "Background"})
        except ApiError as exc:
            if exc.status == 404 and missing_ok:
                return None
            raise

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0) -> str:
        """Run kubectl against the cluster and return its stdout."""
        result = subprocess.run(
            [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result.stdout

    # -- helpers for tests -------------------------------------------------------------------

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Create a Namespace; when the controller-manager runs, wait for its default ServiceAccount."""
        ns = self.create(
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": dict(labels or {})},
            },
        )
        if self.running("kube-controller-manager"):
            wait_for(
                lambda: self.get_or_none(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
                timeout=60,
                what=f"the default ServiceAccount of namespace {name}",
            )
        return dict(ns)

    def create_nodes(self, specs: Iterable[NodeSpec], timeout: float = 60.0) -> list[dict[str, Any]]:
        """Create fake nodes and wait until kwok made them Ready and schedulable."""
        names = []
        for spec in specs:
            self.create("/api/v1/nodes", spec.manifest())
            names.append(spec.name)
        return [self.wait_node_ready(name, timeout) for name in names]

    def wait_node_ready(self, name: str, timeout: float = 60.0) -> dict[str, Any]:
        """Wait for the node's Ready condition and, with the controller-manager, no not-ready taint."""
        watch = [p for p in self.processes.values() if p.name in ("kwok", "kube-controller-manager")]

        def ready() -> dict[str, Any] | None:
            node = self.get_or_none(f"/api/v1/nodes/{name}")
            if node is None:
                return None
            conditions = {c["type"]: c["status"] for c in conditions_of(node)}
            if conditions.get("Ready") != "True":
                return None
            taints = node.get("spec", {}).get("taints") or []
            if self.running("kube-controller-manager") and any(
                t["key"] in NODE_CONDITION_TAINTS for t in taints
            ):
                return None
            return dict(node)

        return wait_for(ready, timeout=timeout, what=f"node {name} to be Ready", watch=watch)

    def delete_nodes(self, names: Iterable[str], timeout: float = 60.0) -> None:
        names = list(names)
        for name in names:
            self.delete(f"/api/v1/nodes/{name}")
        wait_for(
            lambda: all(self.get_or_none(f"/api/v1/nodes/{n}") is None for n in names),
            timeout=timeout,
            what=f"nodes {names} to be deleted",
        )


def conditions_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``status.conditions`` of an object, [] when the status or its conditions are absent or null."""
    return list((obj.get("status") or {}).get("conditions") or [])


def _http_text(url: str, *, context: ssl.SSLContext | None = None, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, context=context, timeout=timeout) as resp:
        return str(resp.read().decode())


def _http_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    return dict(json.loads(_http_text(url, timeout=timeout)))
