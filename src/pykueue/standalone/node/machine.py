"""This machine as one node: its CPUs, memory and GPUs, and which GPU devices are free.

GPUs come from ``nvidia-smi`` when it is present and answers, else from the
config file (``node.gpus: [{flavor: a100, count: 4}]``), so a machine without
GPUs can still play a GPU server for demos and tests. Each device belongs to
one pool, named after the ResourceFlavor whose quota it backs.

GPUs may also be grouped into *domains*, the machine's own topology: devices
joined by NVLink, or behind one PCIe switch. A job's GPUs talk to each other
fastest within one domain, so `DeviceTable` gives a pod (and a gang's pods
together) the devices of one domain when one has room. Domains come from the
config (``node.gpuDomains: [["0", "1"], ["2", "3"]]``), else from ``nvidia-smi
topo -m`` (GPUs linked by NVLink, transitively), else there is one domain.

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

from pykueue.errors import InputError

GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPU_FLAVOR = "gpu"


@dataclass(frozen=True, slots=True)
class Node:
    """What this machine offers: CPUs, memory (bytes) and GPU devices per flavor."""

    cpus: int
    memory: int
    gpus: Mapping[str, tuple[str, ...]]  # flavor -> device ids as CUDA_VISIBLE_DEVICES wants them
    gpu_source: str  # "nvidia-smi", "config" or "none"
    # Groups of devices that work best together (NVLink, one PCIe switch); () is one domain.
    gpu_domains: tuple[tuple[str, ...], ...] = ()

    @property
    def gpu_count(self) -> int:
        return sum(len(devices) for devices in self.gpus.values())

    def describe(self) -> dict[str, Any]:
        return {
            "cpus": self.cpus,
            "memory": self.memory,
            "gpus": {flavor: list(devices) for flavor, devices in self.gpus.items()},
            "gpuSource": self.gpu_source,
            "gpuDomains": [list(domain) for domain in self.gpu_domains],
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


def nvlink_domains(matrix: str) -> tuple[tuple[str, ...], ...]:
    """GPUs joined by NVLink in ``nvidia-smi topo -m``'s matrix, transitively; one group per GPU alone.

    The matrix has a header of ``GPU0 GPU1 ...`` (then NIC and affinity columns) and a
    row per device; a cell ``NV<n>`` is an NVLink between the row's and the column's GPU.
    """
    lines = [line.split() for line in matrix.splitlines() if line.strip()]
    header = next((cells for cells in lines if cells and cells[0].startswith("GPU")), None)
    if header is None:
        return ()
    columns = [cell for cell in header if cell.startswith("GPU")]
    group = {gpu[3:]: gpu[3:] for gpu in columns}

    def root(gpu: str) -> str:
        while group[gpu] != gpu:
            gpu = group[gpu]
        return gpu

    for cells in lines:
        if cells is header or not cells[0].startswith("GPU") or cells[0][3:] not in group:
            continue
        for column, link in zip(columns, cells[1:], strict=False):
            if link.startswith("NV"):
                group[root(column[3:])] = root(cells[0][3:])
    domains: dict[str, list[str]] = {}
    for gpu in group:
        domains.setdefault(root(gpu), []).append(gpu)
    return tuple(tuple(members) for members in domains.values())


def _nvidia_smi_topology() -> tuple[tuple[str, ...], ...]:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return ()
    try:
        out = subprocess.run(
            [binary, "topo", "-m"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return nvlink_domains(out)


def checked_domains(declared: Sequence[Sequence[Any]], devices: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Declared domains (``node.gpuDomains``) that name known devices, each at most once."""
    known = set(devices)
    seen: set[str] = set()
    out = []
    for i, entry in enumerate(declared):
        if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or not entry:
            raise InputError(f"node.gpuDomains[{i}]: a domain is a non-empty list of device ids")
        members = tuple(str(device) for device in entry)
        for device in members:
            if device not in known:
                raise InputError(
                    f"node.gpuDomains[{i}]: no GPU {device!r} on this node (devices: {', '.join(devices)})"
                )
            if device in seen:
                raise InputError(f"node.gpuDomains[{i}]: GPU {device!r} is in two domains")
            seen.add(device)
        out.append(members)
    return tuple(out)


def discover(declared: Sequence[Mapping[str, Any]] = (), domains: Sequence[Sequence[Any]] = ()) -> Node:
    """The node as found: nvidia-smi's GPUs (named by the first declared flavor), else the declared ones."""
    cpus = os.cpu_count() or 1
    memory = _memory_bytes()
    found = _nvidia_smi()
    if found:
        flavor = str(declared[0].get("flavor", DEFAULT_GPU_FLAVOR)) if declared else DEFAULT_GPU_FLAVOR
        groups = checked_domains(domains, found) if domains else _nvidia_smi_topology()
        return Node(cpus, memory, {flavor: tuple(found)}, "nvidia-smi", groups)
    pools: dict[str, tuple[str, ...]] = {}
    next_id = 0
    for entry in declared:
        count = int(entry.get("count", 0))
        flavor = str(entry.get("flavor", DEFAULT_GPU_FLAVOR))
        pools[flavor] = pools.get(flavor, ()) + tuple(str(i) for i in range(next_id, next_id + count))
        next_id += count
    every = [device for devices in pools.values() for device in devices]
    return Node(cpus, memory, pools, "config" if pools else "none", checked_domains(domains, every))


@dataclass
class DeviceTable:
    """Which pod holds which device; a device is never given to two holders."""

    node: Node
    held: dict[str, str] = field(default_factory=dict)  # device -> holder

    def take(self, holder: str, flavor: str | None, count: int, together: int = 0) -> list[str] | None:
        """``count`` free devices of the flavor's pool (any pool if it has none), or None.

        Within one GPU domain when one has room: the domain already holding devices of the
        holder's job (``job#pod``) first, else the one that fits ``together`` devices (a
        gang's whole need; ``count`` by default) most tightly, so larger domains stay whole
        for larger jobs. Only when no domain has room are they spread.
        """
        if count <= 0:
            return []
        pool = self.node.gpus.get(flavor or "")
        if pool is None:
            pool = tuple(d for devices in self.node.gpus.values() for d in devices)
        free = [d for d in pool if d not in self.held]
        if len(free) < count:
            return None
        chosen = self._within_one_domain(holder, free, count, max(count, together)) or free[:count]
        for device in chosen:
            self.held[device] = holder
        return chosen

    def _within_one_domain(self, holder: str, free: list[str], count: int, together: int) -> list[str]:
        job = holder.partition("#")[0]
        mine = {d for d, h in self.held.items() if h.partition("#")[0] == job}
        best: tuple[tuple[int, int], list[str]] | None = None
        for domain in self.node.gpu_domains:
            room = [d for d in free if d in domain]
            if len(room) < count:
                continue
            shared = any(d in mine for d in domain)
            # The job's own domain first; then one that fits the whole gang, tightest first.
            rank = (0 if shared else 1 if len(room) >= together else 2, len(room))
            if best is None or rank < best[0]:
                best = (rank, room[:count])
        return best[1] if best is not None else []

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
