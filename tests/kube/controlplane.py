"""The kube tests' control plane is `pykueue.devcluster.controlplane` with its `processes`
(``pykueue dev-cluster`` starts the same one); the names the tests and the cluster benchmark
import from here."""

from pykueue.devcluster.controlplane import ApiError, KubeCluster, NodeSpec, conditions_of, find_bin_dir
from pykueue.devcluster.processes import (
    ControlPlaneError,
    Process,
    free_port,
    free_ports,
    stop_all_processes,
    wait_for,
)

__all__ = [
    "ApiError",
    "ControlPlaneError",
    "KubeCluster",
    "NodeSpec",
    "Process",
    "conditions_of",
    "find_bin_dir",
    "free_port",
    "free_ports",
    "stop_all_processes",
    "wait_for",
]
