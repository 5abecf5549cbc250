"""`pykueue dev-cluster`: the documented one-command local cluster, run as a user runs it.

A process of its own (its own control plane, fake GPU nodes, pykueue in it): the
kubeconfig it prints works, a queued Job asking for GPUs is admitted and runs on the
labelled nodes, the visibility API answers through the API server, Ctrl-C stops every
component, and a component that exits stops dev-cluster with its name and log. With
``--config`` the controller reads upstream's Configuration (a DRA deviceClassMappings entry).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from pykueue.cli import devcluster_command

from .controlplane import KubeCluster, find_bin_dir
from .upstream_examples import example

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu-a}
spec: {nodeLabels: {pool: gpu-a}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpus}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: gpu-a
      resources: [{name: cpu, nominalQuota: 8}, {name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: default}
spec: {clusterQueue: gpus}
"""

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "generateName": "train-",
        "namespace": "default",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
    },
    "spec": {
        "parallelism": 2,
        "completions": 2,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "t",
                        "image": "busybox",
                        "resources": {
                            "requests": {"cpu": "1", "nvidia.com/gpu": "2"},
                            "limits": {"nvidia.com/gpu": "2"},
                        },
                    }
                ],
            }
        },
    },
}


def _wait_line(proc: subprocess.Popen[str], text: str, timeout: float, seen: list[str]) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                raise AssertionError(f"dev-cluster exited ({proc.returncode}):\n{''.join(seen)}")
            continue
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"no {text!r} after {timeout}s:\n{''.join(seen)}")


def _dev_cluster(tmp_path: Path, kubeconfig: Path) -> list[str]:
    return [
        str(Path(sys.executable).parent / "pykueue"), "dev-cluster", "--nodes", "2", "--gpus", "4",
        "--label", "pool=gpu-a", "--controllers", "none", "--dir", str(tmp_path / "state"),
        "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip


def _visibility_summary(kubectl: list[str]) -> dict[str, object]:
    """The pending workloads of ClusterQueue gpus, read through the API server's aggregation layer."""
    path = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/gpus/pendingworkloads"
    deadline = time.monotonic() + 60
    while True:
        read = subprocess.run([*kubectl, "get", "--raw", path], capture_output=True, text=True)
        if read.returncode == 0:
            return dict(json.loads(read.stdout))
        # Until the APIService is Available the API server answers 503 (or, unregistered, 404).
        assert time.monotonic() < deadline, read.stderr
        time.sleep(0.5)


def test_dev_cluster_runs_a_gpu_job_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    command = _dev_cluster(tmp_path, kubeconfig)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    kubectl = [str(find_bin_dir() / "kubectl"), f"--kubeconfig={kubeconfig}"]
    try:
        _wait_line(proc, "pykueue is managing the cluster", 240, seen)
        assert any(f"export KUBECONFIG={kubeconfig.resolve()}" in line for line in seen)
        nodes = json.loads(subprocess.run([*kubectl, "get", "nodes", "-o", "json"], capture_output=True, text=True,
                                          check=True).stdout)["items"]  # fmt: skip
        assert len(nodes) == 2
        assert all(n["status"]["capacity"]["nvidia.com/gpu"] == "4" for n in nodes)
        assert all(n["metadata"]["labels"]["pool"] == "gpu-a" for n in nodes)
        subprocess.run([*kubectl, "apply", "--server-side", "-f", "-"], input=QUEUES, text=True, check=True,
                       capture_output=True)  # fmt: skip
        made = subprocess.run(
            [*kubectl, "create", "-o", "json", "-f", "-"],
            input=yaml.safe_dump(JOB),
            text=True,
            capture_output=True,
        )
        assert made.returncode == 0, made.stderr
        created = json.loads(made.stdout)
        assert created["spec"]["suspend"] is True  # held by pykueue's webhook
        name = created["metadata"]["name"]
        deadline = time.monotonic() + 120
        while True:
            job = json.loads(subprocess.run([*kubectl, "get", "job", name, "-o", "json"], capture_output=True,
                                            text=True, check=True).stdout)  # fmt: skip
            if any(
                c["type"] == "Complete" and c["status"] == "True" for c in job["status"].get("conditions", [])
            ):
                break
            assert time.monotonic() < deadline, f"job not complete: {job['status']}"
            time.sleep(0.5)
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu-a"}
        summary = _visibility_summary(kubectl)
        assert summary["kind"] == "PendingWorkloadsSummary" and summary["items"] == []
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(seen) + out
    assert "stopped." in out
    gone = subprocess.run([*kubectl, "get", "nodes", "--request-timeout=3s"], capture_output=True, text=True)
    assert gone.returncode != 0  # the API server is gone with it


def _pid_of(binary: str, kubeconfig: Path) -> int:
    """The process running ``binary`` against ``kubeconfig`` (this test's cluster, no other)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(f"/{binary}".encode()) and f"={kubeconfig}".encode() in b" ".join(argv):
            return int(entry.name)
    raise AssertionError(f"no {binary} process for {kubeconfig}")


def test_dev_cluster_stops_and_says_which_component_exited(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        _dev_cluster(tmp_path, kubeconfig), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: list[str] = []
    try:
        _wait_line(proc, "pykueue is managing the cluster", 240, seen)
        # As a kind's controller that gives up: kwok is one of the same child processes.
        os.kill(_pid_of("kwok", tmp_path / "state" / "kubeconfig"), signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    assert proc.returncode == 1, "".join(seen) + out
    assert "error: kwok exited with code -9" in out
    assert "dev-cluster stops" in out and "stopped." in out


def test_watch_components_returns_the_component_that_exited(tmp_path: Path) -> None:
    cluster = KubeCluster(tmp_path, tmp_path)
    lasting = cluster._spawn("kube-apiserver", ["sleep", "600"])
    try:
        gone = cluster._spawn("lws", ["sh", "-c", "echo 'timed out waiting for cache to be synced'; exit 1"])
        stop = asyncio.Event()
        found = asyncio.run(devcluster_command.watch_components(cluster, stop, interval=0.05))
        assert found is gone and stop.is_set()
        assert "lws exited with code 1" in found.exit_message()
        assert "timed out waiting for cache to be synced" in found.exit_message()
    finally:
        cluster.stop()
    assert not lasting.running()


DRA_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames: [gpu.example.com]
"""


def test_dev_cluster_config_sets_the_device_class_mapping(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    config = tmp_path / "config.yaml"
    config.write_text(DRA_CONFIG)
    proc = subprocess.Popen(
        [*_dev_cluster(tmp_path, kubeconfig), "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    kubectl = [str(find_bin_dir() / "kubectl"), f"--kubeconfig={kubeconfig}"]
    try:
        _wait_line(proc, "pykueue is managing the cluster", 240, seen)
        # Upstream's ResourceClaimTemplate sample: its Workload is charged through the file's mapping.
        docs = list(yaml.safe_load_all(example("dra/sample-dra-rct-job.yaml")))[:2]
        made = subprocess.run(
            [*kubectl, "create", "-o", "json", "-f", "-"],
            input=yaml.safe_dump_all(docs),
            text=True,
            capture_output=True,
        )
        assert made.returncode == 0, made.stderr
        deadline = time.monotonic() + 60
        while True:
            listed = subprocess.run(
                [*kubectl, "get", "workloads.kueue.x-k8s.io", "-n", "default", "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
            )
            items = json.loads(listed.stdout)["items"]
            if items:
                break
            assert time.monotonic() < deadline, "no Workload"
            time.sleep(0.5)
        [workload] = items
        assert workload["spec"]["podSets"][0]["template"]["spec"]["overhead"] == {"example.com/gpu": "1"}
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(seen) + out
