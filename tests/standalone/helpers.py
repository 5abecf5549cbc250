"""Helpers for standalone tests: the real `pykueue up` as a child process, its HTTP API and CLI.

Every server gets its own data folder (a real SQLite file) and config home
under ``tmp_path``, a free loopback port, and a Unix socket and work folder in
a folder of its own under /tmp that other users may pass through (``tmp_path``
is root's alone, and tests run jobs as other users). Requests go over the
socket as the test's own user (root: an admin) unless a token is given, as
the CLI does. Teardown kills the server and every process that carries its
store marker (the pods), so no test leaves a process behind, whatever it did
to the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from pykueue.standalone.node import isolation
from pykueue.standalone.node.cgroups import CgroupTree
from pykueue.standalone.node.isolation import store_id

BIN = Path(sys.executable).parent
EXAMPLES = Path(__file__).parents[2] / "examples" / "standalone"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")


def marked_processes(db: Path) -> list[int]:
    needle = f"PYKUEUE_STORE={db.resolve()}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def kill_marked(db: Path) -> None:
    """Kill a server's pods: its cgroup subtree (a pod may have dropped its marker), then the marker."""
    tree = CgroupTree.detect(store_id(db))
    if tree is not None:
        tree.kill_leftovers(timeout=10)
        tree.remove()
    for pid in marked_processes(db):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def shared_folder() -> Path:
    """A fresh folder under /tmp that every user may pass through (0711), for sockets and job folders."""
    folder = Path(tempfile.mkdtemp(prefix="pkt-", dir="/tmp"))
    os.chmod(folder, 0o711)
    return folder


@dataclass
class Server:
    """One `pykueue up` child process and ways to talk to it."""

    root: Path
    config: Path | None
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    token: str = ""
    shared: Path = field(default_factory=shared_folder)
    extra_args: tuple[str, ...] = ()
    default_work_dir: bool = False  # no --work-dir: the server picks its own, as docs/standalone.md says

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket(self) -> Path:
        return self.shared / "api.sock"

    @property
    def work(self) -> Path:
        if self.default_work_dir:
            return isolation.default_work_root(self.data, self.db)
        return self.shared / "work"

    @property
    def db(self) -> Path:
        return self.data / "pykueue.db"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["XDG_CONFIG_HOME"] = str(self.root / "config")
        env.pop("PYKUEUE_SERVER", None)
        env.pop("PYKUEUE_TOKEN", None)
        return env

    def start(self) -> None:
        args = [str(BIN / "pykueue"), "up", "--data", str(self.data), "--port", str(self.port), "--quiet"]
        args += ["--socket", str(self.socket), *self.extra_args]
        if not self.default_work_dir:
            args += ["--work-dir", str(self.work)]
        if self.config is not None:
            args += ["--config", str(self.config)]
        out = open(self.root / f"server-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115 - lives with the child
        self.process = subprocess.Popen(args, env=self.env(), stdout=out, stderr=subprocess.STDOUT)

        def healthy() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"pykueue up exited with {self.process.returncode}")
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, timeout=60)
        self.token = json.loads((self.data / "client.json").read_text())["token"]

    def kill(self) -> None:
        """kill -9 the server (its pods live on, as after a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        self.kill()
        kill_marked(self.db)
        shutil.rmtree(self.shared, ignore_errors=True)
        if self.default_work_dir:
            shutil.rmtree(self.work.parent, ignore_errors=True)  # /var/lib/pykueue/<store id>

    @property
    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.root.glob("server-*.log")))

    # ------------------------------------------------------------ the API

    def request(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> httpx.Response:
        """Over HTTP with ``token``; without one, over the socket as this process's user."""
        if token is not None:
            headers = {"Authorization": f"Bearer {token}"}
            return httpx.request(method, self.url + path, headers=headers, timeout=60, **kwargs)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), timeout=60) as local:
            return local.request(method, "http://pykueue" + path, **kwargs)

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        assert response.status_code < 400, response.text
        return response.json()

    def apply(self, docs: list[dict[str, Any]] | str, token: str | None = None) -> httpx.Response:
        text = docs if isinstance(docs, str) else yaml.safe_dump_all(docs)
        return self.request(
            "POST", "/api/v1/apply", token=token, json={"files": [{"name": "test.yaml", "text": text}]}
        )

    def explanation(self, namespace: str, name: str) -> dict[str, Any] | None:
        """``describe``'s explanation, or None while the job has no Workload yet."""
        response = self.request("GET", f"/api/v1/describe/workload/{namespace}/{name}")
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        explanation: dict[str, Any] = response.json()["explanation"]
        return explanation

    def jobs(self) -> dict[str, dict[str, Any]]:
        return {f"{r['namespace']}/{r['name']}": r for r in self.api("GET", "/api/v1/jobs")}

    def cli(
        self, *args: str, token: str | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = self.env()
        if token is not None:
            env["PYKUEUE_SERVER"] = self.url
            env["PYKUEUE_TOKEN"] = token
        else:
            env["PYKUEUE_SOCKET"] = str(self.socket)
        return subprocess.run(
            [str(BIN / "pykueue"), *args], env=env, capture_output=True, text=True, timeout=120, input=stdin
        )


def write_config(tmp_path: Path, queues: str, gpus: int = 0, flavor: str = "a100") -> Path:
    folder = tmp_path / "cfg"
    folder.mkdir(exist_ok=True)
    (folder / "queues.yaml").write_text(queues)
    config: dict[str, Any] = {"manifests": ["queues.yaml"]}
    if gpus:
        config["node"] = {"gpus": [{"flavor": flavor, "count": gpus}]}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cluster_queue(
    name: str, cpu: str, gpus: int = 0, cohort: str = "", flavor: str = "a100", **spec: Any
) -> str:
    resources = [{"name": "cpu", "nominalQuota": cpu}]
    covered = ["cpu"]
    if gpus:
        resources.append({"name": "nvidia.com/gpu", "nominalQuota": str(gpus)})
        covered.append("nvidia.com/gpu")
    body: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {"coveredResources": covered, "flavors": [{"name": flavor, "resources": resources}]}
        ],
        **spec,
    }
    if cohort:
        body["cohortName"] = cohort
    return yaml.safe_dump_all(
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": body,
            },
        ]
    )


def flavor_and_queue(flavor: str, cq: str, namespace: str, lq: str = "main") -> str:
    return yaml.safe_dump_all(
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": namespace},
                "spec": {"clusterQueue": cq},
            },
        ]
    )


def job(
    name: str,
    script: str,
    namespace: str = "default",
    queue: str = "main",
    cpu: str = "1",
    gpus: int = 0,
    priority_class: str = "",
    grace: int | None = None,
    backoff_limit: int | None = None,
    parallelism: int | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {"name": "main", "command": ["sh", "-c", script], "resources": {"requests": requests}}
        ],
    }
    if grace is not None:
        pod["terminationGracePeriodSeconds"] = grace
    spec: dict[str, Any] = {"template": {"spec": pod}}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def intervals(folder: Path) -> dict[str, tuple[float, float, str]]:
    """Per job file: (start, end, payload) written by jobs as `start T payload` / `end T` lines."""
    out: dict[str, tuple[float, float, str]] = {}
    for path in sorted(folder.glob("*.txt")):
        lines = path.read_text().split("\n")
        start = next(line.split(" ", 2) for line in lines if line.startswith("start "))
        end = next(line.split(" ") for line in lines if line.startswith("end "))
        out[path.stem] = (float(start[1]), float(end[1]), start[2] if len(start) > 2 else "")
    return out


def max_overlap(spans: list[tuple[float, float]]) -> int:
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda p: (p[0], p[1]))
    best = current = 0
    for _, delta in points:
        current += delta
        best = max(best, current)
    return best


def jobset(
    name: str,
    replicated: list[tuple[str, int, int, str, int]],
    namespace: str = "default",
    queue: str = "main",
    success: dict[str, Any] | None = None,
    max_restarts: int | None = None,
) -> dict[str, Any]:
    """A JobSet; ``replicated`` lists (name, replicas, parallelism, shell script, GPUs per pod)."""
    jobs = []
    for rj_name, replicas, parallelism, script, gpus in replicated:
        requests = {"cpu": "100m", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        container = {"name": "main", "command": ["sh", "-c", script], "resources": {"requests": requests}}
        pod = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5, "containers": [container]}
        job_spec = {"parallelism": parallelism, "completions": parallelism, "template": {"spec": pod}}
        jobs.append({"name": rj_name, "replicas": replicas, "template": {"spec": job_spec}})
    spec: dict[str, Any] = {"replicatedJobs": jobs}
    if success is not None:
        spec["successPolicy"] = success
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": spec,
    }


def workload_of(server: Server, namespace: str, job_name: str) -> str:
    """The ``namespace/name`` of the Workload of a job, once the server has made it."""

    def found() -> str:
        rows = server.api("GET", f"/api/v1/workloads?namespace={namespace}")
        return next((f"{namespace}/{r['name']}" for r in rows if r["job"] == job_name), "")

    return str(wait_until(found))
