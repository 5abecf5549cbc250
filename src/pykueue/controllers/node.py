"""This machine as one node: its CPUs, memory and GPUs, and which GPU devices are free.

GPUs come from ``nvidia-smi`` when it is present and answers, else from the
config file (``node.gpus: [{flavor: a100, count: 4}]``), so a machine without
GPUs can still play a GPU server for demos and tests. Each device belongs to
one pool, named after the ResourceFlavor whose quota it backs.

`DeviceTable` is the one place that hands devices out: a device is held from
the moment a pod's process starts until its whole process group has exited,
so a job still terminating (a preempted trainer writing its checkpoint) keeps
its GPUs and the next job waits for them rather than share them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPU_FLAVOR = "gpu"


@dataclass(frozen=True, slots=True)
class Node:
    """What this machine offers: CPUs, memory (bytes) and GPU devices per flavor."""

    cpus: int
    memory: int
    gpus: Mapping[str, tuple[str, ...]]  # flavor -> device ids as CUDA_VISIBLE_DEVICES wants them
    gpu_source: str  # "nvidia-smi", "config" or "none"

    @property
    def gpu_count(self) -> int:
        return sum(len(devices) for devices in self.gpus.values())

    def describe(self) -> dict[str, Any]:
        return {
            "cpus": self.cpus,
            "memory": self.memory,
            "gpus": {flavor: list(devices) for flavor, devices in self.gpus.items()},
            "gpuSource": self.gpu_source,
        }


def _memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _nvidia_smi() -> list[str]:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    try:
        out = subprocess.run(
            [binary, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def discover(declared: Sequence[Mapping[str, Any]] = ()) -> Node:
    """The node as found: nvidia-smi's GPUs (named by the first declared flavor), else the declared ones."""
    cpus = os.cpu_count() or 1
    memory = _memory_bytes()
    found = _nvidia_smi()
    if found:
        flavor = str(declared[0].get("flavor", DEFAULT_GPU_FLAVOR)) if declared else DEFAULT_GPU_FLAVOR
        return Node(cpus, memory, {flavor: tuple(found)}, "nvidia-smi")
    pools: dict[str, tuple[str, ...]] = {}
    next_id = 0
    for entry in declared:
        count = int(entry.get("count", 0))
        flavor = str(entry.get("flavor", DEFAULT_GPU_FLAVOR))
        pools[flavor] = pools.get(flavor, ()) + tuple(str(i) for i in range(next_id, next_id + count))
        next_id += count
    return Node(cpus, memory, pools, "config" if pools else "none")


@dataclass
class DeviceTable:
    """Which pod holds which device; a device is never given to two holders."""

    node: Node
    held: dict[str, str] = field(default_factory=dict)  # device -> holder

    def take(self, holder: str, flavor: str | None, count: int) -> list[str] | None:
        """``count`` free devices of the flavor's pool (any pool if it has none), or None."""
        if count <= 0:
            return []
        pool = self.node.gpus.get(flavor or "")
        if pool is None:
            pool = tuple(d for devices in self.node.gpus.values() for d in devices)
        free = [d for d in pool if d not in self.held]
        if len(free) < count:
            return None
        chosen = free[:count]
        for device in chosen:
            self.held[device] = holder
        return chosen

    def free(self, flavor: str | None) -> int:
        """How many devices of the flavor's pool (any pool if it has none) nobody holds."""
        pool = self.node.gpus.get(flavor or "")
        if pool is None:
            pool = tuple(d for devices in self.node.gpus.values() for d in devices)
        return sum(1 for d in pool if d not in self.held)

    def release(self, holder: str) -> None:
        for device in [d for d, h in self.held.items() if h == holder]:
            del self.held[device]

    def capacity(self, flavor: str | None) -> int:
        pool = self.node.gpus.get(flavor or "")
        return len(pool) if pool is not None else self.node.gpu_count
