"""Standalone mode under crashes and under load: real `pykueue up` processes, real jobs.

    python -m benchmarks.standalone_bench crash   40 one-GPU jobs on 4 GPUs; kill -9 the server
                                                   six times while they run; every job succeeds,
                                                   no job ever runs twice at once, quota back to 0
    python -m benchmarks.standalone_bench load    2,000 one-pod jobs submitted as fast as 8 clients
                                                   can, one apply each; every job runs exactly once

Each job records its runs in a file of its own (start/end lines, a `flock`
that fails if another run of the same job holds it), so the checks read what
really ran, not what the server says. The figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

BIN = Path(sys.executable).parent / "pykueue"
# PYKUEUE_BENCH_LEGACY=1 measures a server from before issue 14 (TCP and a token, no socket).
LEGACY = os.environ.get("PYKUEUE_BENCH_LEGACY") == "1"


class Server:
    """One `pykueue up` process on a private data folder, reached over its socket as root (an admin)."""

    def __init__(self, root: Path, queues: str, gpus: int) -> None:
        self.root = root
        self.shared = Path(tempfile.mkdtemp(prefix="pkbench-", dir="/tmp"))
        os.chmod(self.shared, 0o711)
        config: dict[str, Any] = {
            "manifests": ["queues.yaml"],
            "node": {"gpus": [{"flavor": "a100", "count": gpus}]},
        }
        if os.environ.get("PYKUEUE_BENCH_NO_CGROUPS") == "1":  # to see what the cgroups cost
            config["isolation"] = {"cgroups": False}
        (root / "queues.yaml").write_text(queues)
        (root / "config.yaml").write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        return self.shared / "api.sock"

    def start(self) -> None:
        args = [str(BIN), "up", "--data", str(self.root / "data"), "--port", "0", "--quiet"]
        if not LEGACY:
            args += ["--socket", str(self.socket), "--work-dir", str(self.shared / "work")]
        args += ["--config", str(self.root / "config.yaml")]
        env = {**os.environ, "XDG_CONFIG_HOME": str(self.root / "config")}
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - lives with the child
        self.process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: self._healthy(), 60)

    def _healthy(self) -> bool:
        try:
            return bool(self.get("/healthz") == {"status": "ok"})
        except (httpx.HTTPError, OSError):
            return False

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time of the server and of its pod launcher (not of the pods): pykueue's own cost."""
        assert self.process is not None
        launcher = 0.0
        for entry in os.listdir("/proc"):
            if entry.isdigit() and _parent(int(entry)) == self.process.pid:
                with contextlib.suppress(OSError):
                    if b"pykueue.standalone.node.launcher" in Path(f"/proc/{entry}/cmdline").read_bytes():
                        launcher += _cpu(int(entry))
        return round(_cpu(self.process.pid), 1), round(launcher, 1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        shutil.rmtree(self.shared, ignore_errors=True)

    def client(self) -> httpx.Client:
        if LEGACY:  # a server from before the socket: HTTP with the admin token it wrote
            saved = json.loads((self.root / "data" / "client.json").read_text())
            headers = {"Authorization": f"Bearer {saved['token']}"}
            return httpx.Client(base_url=saved["server"], headers=headers, timeout=60)
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://pykueue", timeout=60
        )

    def get(self, path: str) -> Any:
        with self.client() as http:
            response = http.get(path)
            response.raise_for_status()
            return response.json()


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _cpu(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def _parent(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[1]) if fields else 0


def wait_until(predicate: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"not done within {timeout} s")


def queues(cpu: str, gpus: int) -> str:
    resources = [{"name": "cpu", "nominalQuota": cpu}]
    covered = ["cpu"]
    if gpus:
        resources.append({"name": "nvidia.com/gpu", "nominalQuota": str(gpus)})
        covered.append("nvidia.com/gpu")
    return yaml.safe_dump_all(
        [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "main"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {"coveredResources": covered, "flavors": [{"name": "a100", "resources": resources}]}
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "main", "namespace": "default"},
                "spec": {"clusterQueue": "main"},
            },
        ]
    )


def job(name: str, script: str, cpu: str, gpus: int) -> dict[str, Any]:
    requests = {"cpu": cpu, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "command": ["sh", "-c", script], "resources": {"requests": requests}}
                    ],
                }
            }
        },
    }


# A run of a job: fails (and says so) if another run of the same job holds its lock.
RUN = (
    "flock -n {locks}/$PYKUEUE_JOB sh -c '"
    'echo "start $(date +%s.%N) ${{PYKUEUE_PREEMPTED:-0}}" >> {out}/$PYKUEUE_JOB.txt; {work}; '
    'echo "end $(date +%s.%N)" >> {out}/$PYKUEUE_JOB.txt'
    "' || echo $PYKUEUE_JOB >> {out}/DOUBLE"
)


def _succeeded(server: Server) -> int:
    return sum(j["state"] == "Succeeded" for j in server.get("/api/v1/jobs"))


def _drained(server: Server) -> bool:
    """No workload pending or admitted (a queue's counters are cheap to read; all jobs are not)."""
    cq = server.get("/api/v1/clusterqueues")[0]
    return bool(cq["pending"] == 0 and cq["admitted"] == 0)


def crash(root: Path, jobs: int = 40, kills: int = 6, every: float = 4.0) -> dict[str, Any]:
    server = Server(root, queues("16", 4), gpus=4)
    out, locks = root / "out", root / "locks"
    out.mkdir()
    locks.mkdir()
    script = RUN.format(out=out, locks=locks, work="sleep 3")
    server.start()
    started = time.monotonic()
    try:
        with server.client() as http:
            text = yaml.safe_dump_all([job(f"gpu-{i:02d}", script, "1", 1) for i in range(jobs)])
            http.post("/api/v1/apply", json={"files": [{"name": "jobs", "text": text}]}).raise_for_status()
        for _ in range(kills):
            time.sleep(every)
            server.kill()
            server.start()
        wait_until(lambda: _succeeded(server) == jobs, 600)
        wall = time.monotonic() - started
        wait_until(lambda: server.get("/api/v1/clusterqueues")[0]["admitted"] == 0, 60)
        cq = server.get("/api/v1/clusterqueues")[0]
        rows = server.get("/api/v1/jobs")
    finally:
        server.stop()
    ends = {p.stem for p in out.glob("*.txt") if "end " in p.read_text()}
    return {
        "jobs": jobs,
        "kills": kills,
        "succeeded": sum(r["state"] == "Succeeded" for r in rows),
        "completed runs seen": len(ends),
        "double runs": (out / "DOUBLE").read_text().split() if (out / "DOUBLE").exists() else [],
        "interruptions": sum(int(r.get("interruptions", 0)) for r in rows),
        "quota used after": [u["used"] for u in cq["usage"]],
        "admitted after": cq["admitted"],
        "wall seconds": round(wall, 1),
    }


def load(root: Path, jobs: int = 2000, clients: int = 8) -> dict[str, Any]:
    server = Server(root, queues("20", 0), gpus=0)
    out = root / "out"
    out.mkdir()
    script = f"echo run >> {out}/$PYKUEUE_JOB.txt"
    server.start()
    names = [f"load-{i:04d}" for i in range(jobs)]
    errors: list[str] = []

    def submit(part: list[str]) -> None:
        with server.client() as http:
            for name in part:
                text = yaml.safe_dump(job(name, script, "100m", 0))
                response = http.post("/api/v1/apply", json={"files": [{"name": name, "text": text}]})
                if response.status_code != 200:
                    errors.append(f"{name}: {response.status_code} {response.text[:200]}")

    try:
        started = time.monotonic()
        threads = [threading.Thread(target=submit, args=(names[i::clients],)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        submitted = time.monotonic() - started
        wait_until(lambda: _drained(server), 900, interval=0.2)
        drained = time.monotonic() - started
        wait_until(lambda: _succeeded(server) == jobs, 60, interval=0.5)
        cpu = server.cpu_seconds()
    finally:
        server.stop()
    runs = {p.stem: p.read_text().count("run") for p in out.glob("*.txt")}
    return {
        "jobs": jobs,
        "clients": clients,
        "submit errors": errors[:5],
        "submits per second": round(jobs / submitted, 1),
        "submit seconds": round(submitted, 1),
        "all succeeded after seconds": round(drained, 1),
        "server CPU seconds (server, launcher)": cpu,
        "server CPU ms per job": round(1000 * sum(cpu) / jobs, 1),
        "jobs that ran": len(runs),
        "jobs that ran more than once": sorted(k for k, v in runs.items() if v != 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["crash", "load", "both"])
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="pykueue-bench-") as folder:
        for what in ("crash", "load") if args.what == "both" else (args.what,):
            root = Path(folder) / what
            root.mkdir()
            results[what] = crash(root) if what == "crash" else load(root)
            print(json.dumps({what: results[what]}, indent=2), flush=True)
    bad = results.get("crash", {}).get("double runs") or results.get("load", {}).get(
        "jobs that ran more than once"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
