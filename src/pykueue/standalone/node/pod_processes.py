"""A pod as processes on this machine: its leading process, its fence, and the marks that find it.

A `Pod` is one running (or terminating) pod: a process group started by the
launcher, in its own cgroup when there are cgroups. Every process of a pod
carries ``PYKUEUE_STORE=<store>`` (and its own ``PYKUEUE_POD`` marker) in its
environment, so the processes a dead server left behind can be found in
``/proc`` (`pods_of`) and killed before anything runs again (`kill_leftovers`).
`pod_variables` is pykueue's part of a pod's environment: those markers, its
index, its devices and, for a gang, what torch.distributed reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from pykueue.standalone.node import local_jobset
from pykueue.standalone.node.cgroups import CgroupTree, PodCgroup
from pykueue.standalone.node.isolation import POD_MARKER_ENV, sweep
from pykueue.standalone.node.job_spec import PodSlot, gang_size, is_gang
from pykueue.standalone.node.launcher_client import LaunchedProcess
from pykueue.store.base import Key, Manifest

MARKER_ENV = "PYKUEUE_STORE"


@dataclass
class Pod:
    """One running (or terminating) pod of a Job: its leading process and its fence."""

    job: Key
    index: int
    process: LaunchedProcess
    devices: list[str]
    log_path: Path
    grace: float
    user: str
    marker: str
    cgroup: PodCgroup | None = None
    name: str = ""
    stopping: bool = False
    ready: bool = True  # running, and its readiness probe (if any) passed
    prober: asyncio.Task[None] | None = None

    @property
    def holder(self) -> str:
        return f"{self.job}#{self.index}"

    def signal_all(self, sig: int) -> None:
        """``sig`` once to every process of the pod: its process group, then what left it in its cgroup.

        Once, because a second SIGTERM runs a program's handler a second time (a checkpoint
        written twice, a shell trap run twice); the group first, because one ``killpg`` also
        reaches a child forked while the cgroup's members are being read.
        """
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)
        if self.cgroup is not None:
            self.cgroup.signal(sig, except_group=self.process.pid)

    def kill_all(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.cgroup is None:
            sweep(self.process.pid, f"{POD_MARKER_ENV}={self.marker}")

    def gone(self) -> bool:
        return self.cgroup.empty() if self.cgroup is not None else True


def pod_variables(
    store_marker: str,
    pod_marker: str,
    key: Key,
    slot: PodSlot,
    devices: list[str],
    preempted: bool,
    job: Manifest | None,
    gang_port: int,
) -> dict[str, str]:
    """pykueue's own variables for pod ``slot`` of ``job``, set last so a Job cannot hide them."""
    index = slot.index
    variables = {
        MARKER_ENV: store_marker,
        POD_MARKER_ENV: pod_marker,
        "PYKUEUE_NAMESPACE": key.namespace,
        "PYKUEUE_JOB": key.name,
        "PYKUEUE_POD_INDEX": str(index),
        "PYKUEUE_POD_NAME": slot.name,
        "JOB_COMPLETION_INDEX": str(index),
        "CUDA_VISIBLE_DEVICES": ",".join(devices),
    }
    if preempted:
        variables["PYKUEUE_PREEMPTED"] = "1"
    if job is None or not is_gang(job):
        return variables
    # What torch.distributed (and torchrun's workers) read to find each other, one node.
    world = str(gang_size(job))
    variables.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(gang_port),
        WORLD_SIZE=world,
        RANK=str(index),
        LOCAL_RANK=str(index),
        LOCAL_WORLD_SIZE=world,
        NODE_RANK="0",
        GROUP_RANK="0",
    )
    if slot.jobset_pod is not None:
        variables.update(local_jobset.environment(slot.jobset_pod))
    return variables


def kill_leftovers(
    store_marker: str, cgroups: CgroupTree | None, timeout: float
) -> tuple[int, int, set[tuple[str, str]]]:
    """Kill every process an earlier server on this store left; wait until they are gone.

    Returns how many there were, how many would not die, and the (namespace, name) of
    the jobs they belonged to (read before they are killed).
    """
    stuck = 0
    found = _marked_processes(f"{MARKER_ENV}={store_marker}")
    present = set(found)
    jobs = {job for job in map(_job_of, found) if job is not None}
    if cgroups is not None:
        present.update(pid for pod in cgroups.leftovers() for pid in pod.pids())
        stuck = cgroups.kill_leftovers(timeout)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while found and time.monotonic() < deadline:
        found = [pid for pid in found if _alive(pid)]
        time.sleep(0.02)
    return len(present), stuck + len(found), jobs


def pods_of(db_path: Path) -> list[int]:
    """PIDs of this user's processes a server on ``db_path`` started (they carry its marker)."""
    return _marked_processes(f"{MARKER_ENV}={db_path.resolve()}")


def _marked_processes(marker: str) -> list[int]:
    """PIDs of this user's processes whose environment carries ``marker``."""
    found = []
    needle = marker.encode() + b"\0"
    own = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                data = environ.read() + b"\0"
        except OSError:
            continue
        if b"\0" + needle in b"\0" + data:
            found.append(int(entry))
    return found


def _job_of(pid: int) -> tuple[str, str] | None:
    """The (namespace, name) of the job a pod's process belongs to, from its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return None
    found = dict(entry.split(b"=", 1) for entry in entries if b"=" in entry)
    namespace, name = found.get(b"PYKUEUE_NAMESPACE"), found.get(b"PYKUEUE_JOB")
    if namespace is None or name is None:
        return None
    return namespace.decode(errors="replace"), name.decode(errors="replace")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"  # a zombie holds nothing: it only waits to be reaped
