"""Fixtures for the operations tests: the controller as separate `pykueue controller` processes.

The CRD and ``kueue`` fixtures are the controller tests' (imported, so pytest registers them here
too). `Controllers` starts processes that tests may kill -9, and stops whatever is left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from ..controller.conftest import kueue, kueue_crds, wait
from ..controlplane import KubeCluster, free_port

__all__ = ["Controller", "Controllers", "controllers", "kueue", "kueue_crds"]

PYKUEUE = str(Path(sys.executable).parent / "pykueue")
START_TIMEOUT = 90.0


class Controller:
    """One `pykueue controller` process with its log and its metrics port."""

    def __init__(
        self,
        cluster: KubeCluster,
        log_path: Path,
        *args: str,
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.log_path = log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            [
                PYKUEUE,
                "controller",
                "--kubeconfig",
                str(kubeconfig or cluster.kubeconfig),
                "--resync-seconds",
                "0.3",
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(self.port),
                *args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.identity = f"{socket.gethostname()}_{self.process.pid}"

    def log(self) -> str:
        return self.log_path.read_text()

    def http(self, path: str, token: str = "") -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    # A `pykueue controller` process imports the whole stack before it serves: 30 s was too short
    # beside two more kube-test workers on a loaded 2-core machine (make unit, docs/testing.md).
    def wait_serving(self, timeout: float = START_TIMEOUT) -> None:
        def up() -> bool:
            assert self.process.poll() is None, self.log()
            try:
                return self.http("/healthz")[0] == 200
            except OSError:
                return False

        wait(up, timeout, "the controller's health port")

    def wait_running(self, timeout: float = START_TIMEOUT) -> None:
        def running() -> bool:
            assert self.process.poll() is None, self.log()
            return "pykueue controller is running" in self.log()

        wait(running, timeout, "the controller to run")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.process.returncode


class Controllers:
    def __init__(self, cluster: KubeCluster, directory: Path) -> None:
        self.cluster = cluster
        self.directory = directory
        self.started: list[Controller] = []

    def start(
        self, *args: str, kubeconfig: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Controller:
        log_path = self.directory / f"controller-{len(self.started)}.log"
        controller = Controller(self.cluster, log_path, *args, kubeconfig=kubeconfig, env=env)
        self.started.append(controller)
        return controller

    def stop_all(self) -> None:
        for controller in reversed(self.started):
            controller.stop()


@pytest.fixture
def controllers(kwok_cluster: KubeCluster, kueue_crds: list[str], tmp_path: Path) -> Iterator[Controllers]:
    group = Controllers(kwok_cluster, tmp_path)
    try:
        yield group
    finally:
        group.stop_all()
        time.sleep(0.1)
