"""Fixtures for the controller's end-to-end tests: CRDs installed, the controller running in-process.

* ``kueue_crds``  (session) our CRDs applied with `pykueue install`'s code and Established
* ``controller``  (test)    a `Manager` on its own event loop in a thread, stopped in teardown
* ``kueue``       (test)    a small client for the test: apply manifests (removed afterwards),
                            read objects, wait for a condition with a deadline
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from pykueue.cli import controller_command
from pykueue.devcluster import running
from pykueue.engine.config import EngineConfig
from pykueue.kube import deploy, local_registration
from pykueue.multikueue import controller as multikueue
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.manager import Manager
from pykueue.store import kubernetes

from ..controlplane import ApiError, KubeCluster

T = TypeVar("T")
PYKUEUE = str(Path(sys.executable).parent / "pykueue")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WEBHOOK_CONFIGURATIONS = (
    ("MutatingWebhookConfiguration", deploy.MUTATING_WEBHOOK),
    ("ValidatingWebhookConfiguration", deploy.VALIDATING_WEBHOOK),
)


@pytest.fixture(scope="session")
def kueue_crds(kwok_cluster: KubeCluster) -> list[str]:
    async def install() -> list[str]:
        store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(kwok_cluster.kubeconfig))
        try:
            return await controller_command.apply_all(
                store, controller_command.default_manifests(crds_only=True)
            )
        finally:
            await store.close()

    applied = asyncio.run(install())
    # Discovery (what kubectl uses) lags a little behind Established.
    wait(
        lambda: "clusterqueues" in kwok_cluster.kubectl("api-resources", "--api-group=kueue.x-k8s.io"),
        30,
        "discovery",
    )
    return applied


def wait(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.2,
    describe: Callable[[], object] | None = None,
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds
    (and what ``describe`` says of the state then, so that a rare failure says where it stopped)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = probe()
        except (ApiError, KeyError, IndexError, TypeError) as exc:
            result, last = None, exc
        if result:
            return result
        if time.monotonic() > deadline:
            message = f"timed out after {timeout:.0f}s waiting for {what}" + (f" ({last})" if last else "")
            if describe is not None:
                try:
                    message += f"; then: {describe()}"
                except (ApiError, KeyError, IndexError, TypeError) as exc:
                    message += f"; then: not described ({exc!r})"
            raise AssertionError(message)
        time.sleep(interval)


class ControllerThread:
    """The controller on its own asyncio loop in a daemon thread."""

    def __init__(
        self,
        kubeconfig: str | kubernetes.KubeConfig,
        webhook_namespace: str = "",
        config: EngineConfig | None = None,
        frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS,
        settings: jobframework.Settings | None = None,
        multikueue: multikueue.Settings | None = None,
        policy_history_namespace: str = "",
    ) -> None:
        self.frameworks = frameworks
        self.policy_history_namespace = policy_history_namespace
        self.multikueue = multikueue
        self.settings = settings or jobframework.Settings()
        # A kubeconfig file, or credentials made by the test (e.g. a service account's token).
        self.kube_config = (
            kubeconfig
            if isinstance(kubeconfig, kubernetes.KubeConfig)
            else kubernetes.load_kubeconfig(kubeconfig)
        )
        # What `pykueue controller` runs with unless told otherwise (asynchronous evictions...).
        self.config = config or controller_command.engine_config(None, fair_sharing=False, nominal_first=True)
        # With a namespace, the webhook server runs on the same loop, registered by URL.
        self.webhook_namespace = webhook_namespace
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.local: running.LocalPykueue | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="pykueue-controller", daemon=True)

    def launch(self) -> ControllerThread:
        """Start the thread without waiting for the controller to be ready."""
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> ControllerThread:
        self._thread.start()
        if not self.ready.wait(timeout):
            self.stop()
            raise AssertionError(f"controller not ready after {timeout}s: {self.error!r}")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as exc:
            self.error = exc
            self.ready.set()
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self.local = running.LocalPykueue(
            self.kube_config,
            webhook_namespace=self.webhook_namespace,
            config=self.config,
            frameworks=self.frameworks,
            settings=self.settings,
            multikueue=self.multikueue,
            policy_history_namespace=self.policy_history_namespace,
        )
        ready = asyncio.Event()
        waiter = asyncio.ensure_future(ready.wait())
        waiter.add_done_callback(lambda _: self.ready.set())
        try:
            await self.local.run(self._stop, ready)
        finally:
            waiter.cancel()

    @property
    def manager(self) -> Manager | None:
        return None if self.local is None else self.local.manager

    def stop(self, timeout: float = 30.0) -> None:
        if self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the controller did not stop"
        if self.error is not None:
            raise self.error

    def run_in_loop(self, fn: Callable[[], T]) -> T:
        """Read the manager's state on its own loop (it is not thread-safe)."""
        result: list[T] = []
        done = threading.Event()

        def call() -> None:
            try:
                result.append(fn())
            finally:
                done.set()

        self._loop.call_soon_threadsafe(call)
        assert done.wait(10), "the controller loop is stuck"
        return result[0]


@pytest.fixture
def controller(kwok_cluster: KubeCluster, kueue_crds: list[str]) -> Iterator[ControllerThread]:
    thread = ControllerThread(str(kwok_cluster.kubeconfig)).start()
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture
def controller_with_webhooks(kwok_cluster: KubeCluster, kueue_crds: list[str]) -> Iterator[ControllerThread]:
    """The controller and the webhook server (Job suspension, validation) on one loop."""
    system = f"pykueue-system-{secrets.token_hex(3)}"
    kwok_cluster.create_namespace(system)
    thread = ControllerThread(str(kwok_cluster.kubeconfig), webhook_namespace=system).start()
    try:
        yield thread
    finally:
        thread.stop()
        kwok_cluster.delete(f"/api/v1/namespaces/{system}")


class Kueue:
    """What a test does to the cluster, with cleanup of everything it applied."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self.applied: list[str] = []

    def apply(self, text: str | dict[str, Any], namespace: str | None = None) -> None:
        docs = [text] if isinstance(text, dict) else [d for d in yaml.safe_load_all(text) if d]
        for doc in docs:
            if namespace and doc["kind"] in ("LocalQueue", "Job", "Workload"):
                doc.setdefault("metadata", {})["namespace"] = namespace
            self.cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(doc))
            meta = doc["metadata"]
            self.applied.append(
                f"{doc['kind'].lower()}/{meta['name']}"
                + (f" -n {meta['namespace']}" if meta.get("namespace") else "")
            )

    def create_job(self, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self.cluster.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        self.applied.append(f"job/{created['metadata']['name']} -n {namespace}")
        return created

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        job: dict[str, Any] = self.cluster.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        return job

    def cluster_queue(self, name: str) -> dict[str, Any]:
        cq: dict[str, Any] = self.cluster.get(f"{KUEUE}/clusterqueues/{name}")
        return cq

    def local_queue(self, namespace: str, name: str) -> dict[str, Any]:
        lq: dict[str, Any] = self.cluster.get(f"{KUEUE}/namespaces/{namespace}/localqueues/{name}")
        return lq

    def workload_of(self, job: dict[str, Any]) -> dict[str, Any] | None:
        namespace, uid = job["metadata"]["namespace"], job["metadata"]["uid"]
        items = self.cluster.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
        owned = [
            w for w in items if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences", []))
        ]
        return owned[0] if owned else None

    def events_of(self, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the core/v1 Events about ``obj``, oldest first."""
        meta = obj["metadata"]
        items = self.cluster.get(f"/api/v1/namespaces/{meta['namespace']}/events")["items"]
        mine = [e for e in items if e["involvedObject"].get("uid") == meta["uid"]]
        mine.sort(key=lambda e: (e.get("lastTimestamp") or "", e["metadata"].get("resourceVersion", "")))
        return [(e["type"], e["reason"], e.get("message", "")) for e in mine]

    def pods_of(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = self.cluster.get(
            f"/api/v1/namespaces/{namespace}/pods?labelSelector=batch.kubernetes.io/job-name%3D{job_name}"
        )["items"]
        return pods

    def cleanup(self) -> None:
        for item in reversed(self.applied):
            what, _, rest = item.partition(" ")
            args = ["delete", what, "--ignore-not-found", "--wait=false"]
            if rest:
                args.extend(rest.split())
            self.cluster.kubectl(*args, check=False)


@pytest.fixture
def kueue(kwok_cluster: KubeCluster, kueue_crds: list[str]) -> Iterator[Kueue]:
    client = Kueue(kwok_cluster)
    try:
        yield client
    finally:
        client.cleanup()


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    if not obj:
        return None
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_true(obj: dict[str, Any] | None, kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def job_manifest(
    name: str,
    queue: str | None,
    *,
    parallelism: int = 1,
    completions: int | None = None,
    cpu: str = "1",
    memory: str = "200Mi",
    suspend: bool | None = True,
    run_duration: str = "1s",
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue} if queue else {}
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "completions": completions if completions is not None else parallelism,
        "template": {
            "metadata": {"annotations": {"pykueue.test/run-duration": run_duration}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.invalid/sleep:1",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }
                ],
            },
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    if priority_class:
        spec["template"]["spec"]["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, "annotations": dict(annotations or {})},
        "spec": spec,
    }


@pytest.fixture(scope="session")
def jobset_controller(kwok_cluster: KubeCluster) -> Iterator[KubeCluster]:
    """The JobSet controller (for JobSets, and the JobSets a TrainJob runs as), once per session."""
    from pykueue.devcluster import kinds as kind_controllers

    kind_controllers.start(kwok_cluster, kind_controllers.JOBSET)
    try:
        yield kwok_cluster
    finally:
        kind_controllers.stop(kwok_cluster, kind_controllers.JOBSET)


@pytest.fixture(scope="session")
def lws_controller(kwok_cluster: KubeCluster) -> Iterator[KubeCluster]:
    """The LeaderWorkerSet controller (the LWS sample and its TAS sample), once per session."""
    from pykueue.devcluster import kinds as kind_controllers

    kind_controllers.start(kwok_cluster, kind_controllers.LWS)
    try:
        yield kwok_cluster
    finally:
        kind_controllers.stop(kwok_cluster, kind_controllers.LWS)


# --- the controller outside the cluster, with its visibility API registered ---------------------


def host_address() -> str:
    """This machine's address on its first non-loopback route (the API server refuses loopback endpoints)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        # A UDP "connect" sends nothing; it only picks the outgoing interface.
        for target in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
            with contextlib.suppress(OSError):
                probe.connect((target, 9))
                address = str(probe.getsockname()[0])
                if not address.startswith("127."):
                    return address
    raise RuntimeError("this machine has no non-loopback IPv4 address for the API server to reach")


@dataclass
class LocalController:
    process: subprocess.Popen[str]
    log: Path
    address: str
    port: int


@contextlib.contextmanager
def local_controller(
    kwok_cluster: KubeCluster, log_path: Path, system: str, *extra: str, api_services: bool = False
) -> Iterator[subprocess.Popen[str]]:
    """`pykueue controller --local-webhooks` against the cluster, running until the block ends.

    Afterwards the cluster is as the session left it: no webhook configurations (nor, with
    ``api_services``, the visibility APIServices), the session's CRDs, no lease namespace.
    """
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            PYKUEUE,
            "controller",
            "--kubeconfig",
            str(kwok_cluster.kubeconfig),
            "--resync-seconds",
            "0.3",
            "--local-webhooks",
            *extra,
            "--webhook-port",
            "0",
            "--lease-namespace",
            system,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait(
            lambda: "pykueue controller is running" in log_path.read_text() or process.poll() is not None,
            60,
            "the controller with local webhooks to start",
        )
        assert process.poll() is None, log_path.read_text()
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(15)
        log.close()
        if api_services:
            for doc in deploy.api_services("", ""):
                kwok_cluster.delete(f"/apis/apiregistration.k8s.io/v1/apiservices/{doc['metadata']['name']}")
        for kind, name in WEBHOOK_CONFIGURATIONS:
            kwok_cluster.delete(f"/apis/admissionregistration.k8s.io/v1/{kind.lower()}s/{name}")
        subprocess.run(
            [PYKUEUE, "install", "--crds-only", "--kubeconfig", str(kwok_cluster.kubeconfig)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        kwok_cluster.delete(f"/api/v1/namespaces/{system}")


@pytest.fixture
def visibility_controller(
    kwok_cluster: KubeCluster, kueue_crds: list[str], tmp_path: Path
) -> Iterator[LocalController]:
    system = f"pykueue-vis-{secrets.token_hex(3)}"
    address = host_address()
    log_path = tmp_path / "controller.log"
    with local_controller(
        kwok_cluster, log_path, system, "--webhook-host", address, api_services=True
    ) as process:

        def available() -> bool:
            for version in ("v1beta2", "v1beta1"):
                service = kwok_cluster.get_or_none(
                    f"/apis/apiregistration.k8s.io/v1/apiservices/{version}.visibility.kueue.x-k8s.io"
                )
                if not is_true(service, "Available"):
                    return False
            return True

        try:
            wait(available, 60, "the visibility APIServices to become Available")
        except AssertionError as exc:
            services = kwok_cluster.kubectl("get", "apiservices", "-o", "yaml", check=False)
            detail = [line for line in services.splitlines() if "visibility" in line or "message" in line]
            raise AssertionError(f"{exc}\n{detail}\n{log_path.read_text()[-3000:]}") from None
        slice_ = kwok_cluster.get(
            f"/apis/discovery.k8s.io/v1/namespaces/{system}/endpointslices/{local_registration.LOCAL_VISIBILITY_SERVICE}"
        )
        yield LocalController(process, log_path, address, int(slice_["ports"][0]["port"]))


# --- upstream's kubectl plugin ---------------------------------------------------------------

HACK = Path(__file__).resolve().parents[3] / "hack"


@pytest.fixture(scope="session")
def kueuectl_path() -> str:
    """A PATH with `kubectl-kueue` (built by hack/kueuectl) first; fails, never skips, without it."""
    found = subprocess.run(
        ["bash", str(HACK / "kueuectl"), "--print-dir"], capture_output=True, text=True, check=True
    )
    bin_dir = Path(found.stdout.strip())
    if not (bin_dir / "kubectl-kueue").is_file():
        pytest.fail(f"{bin_dir}/kubectl-kueue is missing: run `make kueuectl` (hack/kueuectl)", pytrace=False)
    return f"{bin_dir}:{os.environ.get('PATH', '')}"
