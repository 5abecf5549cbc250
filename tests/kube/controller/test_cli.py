"""`pykueue install` and `pykueue controller` as a user runs them: separate processes, a kubeconfig."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import Kueue, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue

PYKUEUE = str(Path(sys.executable).parent / "pykueue")


def test_install_applies_the_crds_again_without_harm(
    kwok_cluster: KubeCluster, kueue_crds: list[str]
) -> None:
    result = subprocess.run(
        [PYKUEUE, "install", "--crds-only", "--kubeconfig", str(kwok_cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "CustomResourceDefinition/clusterqueues.kueue.x-k8s.io applied" in lines
    assert "CustomResourceDefinition/workloads.kueue.x-k8s.io applied" in lines


@pytest.fixture
def controller_process(
    kwok_cluster: KubeCluster, kueue_crds: list[str], tmp_path: Path
) -> Iterator[subprocess.Popen[str]]:
    log = (tmp_path / "controller.log").open("w")
    process = subprocess.Popen(
        [PYKUEUE, "controller", "--kubeconfig", str(kwok_cluster.kubeconfig), "--resync-seconds", "0.3"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait(
            lambda: (
                "pykueue controller is running" in (tmp_path / "controller.log").read_text()
                or process.poll() is not None
            ),
            90,  # a start-up guard, generous for a loaded machine running the kube tests in parallel
            "the controller to start",
        )
        assert process.poll() is None, (tmp_path / "controller.log").read_text()
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()


def test_the_controller_command_admits_a_job_and_stops_on_sigterm(
    kueue: Kueue, controller_process: subprocess.Popen[str], fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    job = kueue.create_job(ns, job_manifest("cli", "queue", parallelism=2))
    wait(lambda: is_true(kueue.workload_of(job), "Admitted"), 30, "admission by the controller process")
    wait(lambda: is_true(kueue.job(ns, "cli"), "Complete"), 60, "the job to complete")
    wait(lambda: is_true(kueue.workload_of(job), "Finished"), 30, "Workload Finished")

    controller_process.send_signal(signal.SIGTERM)
    assert controller_process.wait(15) == 0
