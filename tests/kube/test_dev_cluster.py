"""`pykueue dev-cluster`: the documented one-command local cluster, run as a user runs it.

A process of its own (its own control plane, fake GPU nodes, pykueue in it): the
kubeconfig it prints works, a queued Job asking for GPUs is admitted and runs on the
labelled nodes, and Ctrl-C stops every component.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .controlplane import find_bin_dir

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


def test_dev_cluster_runs_a_gpu_job_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    command = [
        str(Path(sys.executable).parent / "pykueue"), "dev-cluster", "--nodes", "2", "--gpus", "4",
        "--label", "pool=gpu-a", "--controllers", "none", "--dir", str(tmp_path / "state"),
        "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip
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
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(seen) + out
    assert "stopped." in out
    gone = subprocess.run([*kubectl, "get", "nodes", "--request-timeout=3s"], capture_output=True, text=True)
    assert gone.returncode != 0  # the API server is gone with it
