"""Each local pod in a cgroup of its own: stopped as a whole, limited and measured like a pod.

A process group is not a container: a pod's process can ``setsid`` out of it,
and with ``env -i`` even lose the environment marker the executor looks for.
A cgroup cannot be left by an unprivileged process, so when one is available
every pod runs in

    <own cgroup>/pykueue-<store id>/<namespace>.<job>.<uid>/<index>-<serial>

in every hierarchy pykueue may write to:

* cgroup v2 (the unified hierarchy, ``/sys/fs/cgroup`` or a hybrid system's
  ``/sys/fs/cgroup/unified``): membership, ``cgroup.kill``, CPU time, and the
  ``cpu``/``memory`` controllers when the parent lets us enable them;
* cgroup v1 ``memory`` and ``cpu`` hierarchies (and ``cpuacct`` without v2), for the limits and
  accounting that v2 cannot give on a hybrid system.

Limits follow the kubelet's rules for a container: CPU requests become a
weight (``cpu.weight`` / ``cpu.shares``), CPU limits a quota (``cpu.max`` /
``cpu.cfs_quota_us``), memory limits a hard cap (``memory.max`` /
``memory.limit_in_bytes``); a memory request alone is not enforced.

The store id names the subtree, so a restarted server finds every process an
earlier server on the same store left behind, whatever it did to its
environment, and kills it before anything starts.

When no hierarchy is writable (an unprivileged server without delegation),
`detect` returns None and the executor falls back to process groups and
sessions; `FALLBACK_WARNING` says what that cannot catch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pykueue.api import quantity

V1_CONTROLLERS = ("memory", "cpu", "cpuacct")
FALLBACK_WARNING = (
    "no writable cgroup hierarchy: each pod is stopped by its process group and session, "
    "so a process that leaves both (setsid) and clears its environment (env -i) can outlive its job; "
    "CPU and memory limits are not enforced"
)
CPU_PERIOD_US = 100_000


@dataclass(frozen=True, slots=True)
class Limits:
    """What the kubelet would set for a pod, from its container's requests and limits (milli-units)."""

    cpu_request_milli: int = 0
    cpu_limit_milli: int = 0
    memory_limit_bytes: int = 0

    @staticmethod
    def of_container(container: dict[str, object]) -> Limits:
        resources = container.get("resources") or {}
        assert isinstance(resources, dict)
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}

        def milli(values: object, name: str) -> int:
            if not isinstance(values, dict) or values.get(name) is None:
                return 0
            try:
                return max(0, quantity.parse(str(values[name])))
            except ValueError:
                return 0

        cpu_request = milli(requests, "cpu") or milli(limits, "cpu")  # as Kubernetes defaults a request
        return Limits(cpu_request, milli(limits, "cpu"), milli(limits, "memory") // 1000)

    def cpu_shares(self) -> int:
        """cgroup v1 ``cpu.shares``, as the kubelet computes it (2 for no request)."""
        return max(2, self.cpu_request_milli * 1024 // 1000) if self.cpu_request_milli else 2

    def cpu_weight(self) -> int:
        """cgroup v2 ``cpu.weight``: the shares mapped onto 1..10000 as the kubelet maps them."""
        return min(10_000, 1 + (self.cpu_shares() - 2) * 9_999 // 262_142)

    def cpu_quota_us(self) -> int:
        return max(1_000, self.cpu_limit_milli * CPU_PERIOD_US // 1000) if self.cpu_limit_milli else 0


@dataclass(frozen=True, slots=True)
class Usage:
    """What a pod consumed, as far as the hierarchies can tell (0 when unknown)."""

    cpu_seconds: float = 0.0
    memory_peak_bytes: int = 0


@dataclass(frozen=True, slots=True)
class _Mount:
    kind: str  # "v2" or the v1 controller
    folder: Path  # where this process's own cgroup is, in that hierarchy


def _mounts() -> list[_Mount]:
    """This process's own cgroup folder in each hierarchy we can use (v2 first)."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    v2_path = ""
    v1_paths: dict[str, str] = {}
    for line in own:
        number, controllers, path = line.split(":", 2)
        if number == "0" and not controllers:
            v2_path = path
        for controller in controllers.split(","):
            v1_paths[controller] = path
    found: list[_Mount] = []
    for line in mountinfo:
        before, _, after = line.partition(" - ")
        fields, fs = before.split(), after.split()
        if len(fields) < 5 or len(fs) < 3:
            continue
        root, point = fields[3], fields[4]
        if fs[0] == "cgroup2" and v2_path:
            folder = _inside(point, root, v2_path)
            if folder is not None:
                found.insert(0, _Mount("v2", folder))
        elif fs[0] == "cgroup":
            options = fs[2].split(",")
            for controller in V1_CONTROLLERS:
                if controller in options and controller in v1_paths:
                    folder = _inside(point, root, v1_paths[controller])
                    if folder is not None:
                        found.append(_Mount(controller, folder))
    return found


def _inside(mount_point: str, mount_root: str, own: str) -> Path | None:
    """The folder of cgroup ``own`` under a mount of ``mount_root`` (None if not visible there)."""
    rel = os.path.relpath(own, mount_root)
    if rel.startswith(".."):
        return None
    return Path(mount_point) / ("" if rel == "." else rel)


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
    except OSError:
        return False
    return True


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@dataclass
class PodCgroup:
    """One pod's cgroup: the folder in every hierarchy it joins."""

    name: str
    folders: dict[str, Path]  # hierarchy kind -> folder

    @property
    def procs_files(self) -> list[str]:
        """The files a new pod process writes its PID to before it runs the command."""
        return [str(folder / "cgroup.procs") for folder in self.folders.values()]

    @property
    def membership(self) -> Path:
        return self.folders.get("v2") or next(iter(self.folders.values()))

    def pids(self) -> list[int]:
        return [int(p) for p in _read(self.membership / "cgroup.procs").split() if p.strip().isdigit()]

    def empty(self) -> bool:
        events = _read(self.membership / "cgroup.events")
        if events:
            return "populated 0" in events
        return not self.pids()

    def signal(self, sig: int, except_group: int | None = None) -> None:
        """``sig`` to every process in the cgroup but those of process group ``except_group``."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if except_group is None or os.getpgid(pid) != except_group:
                    os.kill(pid, sig)

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, children forked meanwhile included."""
        v2 = self.folders.get("v2")
        if v2 is not None and _write(v2 / "cgroup.kill", "1"):
            return
        for _ in range(100):  # a process may fork while we kill: go round until none is left
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def usage(self) -> Usage:
        cpu = 0.0
        v2 = self.folders.get("v2")
        for line in _read(v2 / "cpu.stat").splitlines() if v2 is not None else []:
            if line.startswith("usage_usec "):
                cpu = int(line.split()[1]) / 1e6
        if not cpu and "cpuacct" in self.folders:
            text = _read(self.folders["cpuacct"] / "cpuacct.usage").strip()
            cpu = int(text) / 1e9 if text.isdigit() else 0.0
        peak_text = ""
        if v2 is not None:
            peak_text = _read(v2 / "memory.peak").strip()
        if not peak_text.isdigit() and "memory" in self.folders:
            peak_text = _read(self.folders["memory"] / "memory.max_usage_in_bytes").strip()
        return Usage(round(cpu, 3), int(peak_text) if peak_text.isdigit() else 0)

    def remove(self) -> None:
        for folder in self.folders.values():
            _rmdir(folder)
            _rmdir(folder.parent)  # the job's folder goes with its last pod


def _rmdir(folder: Path) -> None:
    # A folder still in use (EBUSY, ENOTEMPTY) stays; the next start of the server removes it.
    with contextlib.suppress(OSError):
        folder.rmdir()


@dataclass
class CgroupTree:
    """pykueue's cgroup subtree for one store, in every hierarchy it may write to."""

    roots: dict[str, Path]  # hierarchy kind -> .../pykueue-<store id>
    v2_controllers: frozenset[str] = frozenset()
    _serial: int = field(default=0, repr=False)

    @staticmethod
    def detect(store_id: str) -> CgroupTree | None:
        """The subtree, created where this process may create cgroups; None where it may nowhere."""
        roots: dict[str, Path] = {}
        for mount in _mounts():
            if mount.kind in roots:
                continue
            root = mount.folder / f"pykueue-{store_id}"
            try:
                root.mkdir(exist_ok=True)
            except OSError:
                continue
            if not (root / "cgroup.procs").exists():
                continue
            roots[mount.kind] = root
        if "v2" in roots and "cpuacct" in roots:
            # v2's cpu.stat counts CPU time without any controller: one hierarchy less per pod.
            _rmdir(roots.pop("cpuacct"))
        if not roots:
            return None
        controllers: frozenset[str] = frozenset()
        if "v2" in roots:
            available = set(_read(roots["v2"] / "cgroup.controllers").split())
            wanted = available & {"cpu", "memory"}
            if wanted and _write(roots["v2"] / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted)):
                controllers = frozenset(wanted)
        return CgroupTree(roots, controllers)

    def describe(self) -> str:
        parts = []
        if "v2" in self.roots:
            limits = (
                f" with the {'/'.join(sorted(self.v2_controllers))} controllers"
                if self.v2_controllers
                else ""
            )
            parts.append(f"cgroup v2 at {self.roots['v2']}{limits}")
        v1 = [k for k in self.roots if k != "v2"]
        if v1:
            parts.append(f"cgroup v1 {', '.join(v1)}")
        return "each pod in its own cgroup (" + "; ".join(parts) + ")"

    def enforces(self) -> set[str]:
        """Which of cpu and memory limits are enforced."""
        out = set(self.v2_controllers)
        out.update(k for k in ("cpu", "memory") if k in self.roots)
        return out

    def pod(self, job_folder: str, index: int, limits: Limits) -> PodCgroup:
        """A new, empty cgroup for one pod of a job, with its limits set."""
        self._serial += 1
        name = f"{index}-{self._serial}"
        folders: dict[str, Path] = {}
        for kind, root in self.roots.items():
            parent = root / job_folder
            parent.mkdir(exist_ok=True)
            if kind == "v2" and self.v2_controllers:
                _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in self.v2_controllers))
            folder = parent / name
            folder.mkdir(exist_ok=True)
            folders[kind] = folder
        cgroup = PodCgroup(f"{job_folder}/{name}", folders)
        self._set_limits(cgroup, limits)
        return cgroup

    def _set_limits(self, cgroup: PodCgroup, limits: Limits) -> None:
        v2 = cgroup.folders.get("v2")
        if v2 is not None and "cpu" in self.v2_controllers:
            _write(v2 / "cpu.weight", str(limits.cpu_weight()))
            if limits.cpu_quota_us():
                _write(v2 / "cpu.max", f"{limits.cpu_quota_us()} {CPU_PERIOD_US}")
        if v2 is not None and "memory" in self.v2_controllers and limits.memory_limit_bytes:
            _write(v2 / "memory.max", str(limits.memory_limit_bytes))
        cpu = cgroup.folders.get("cpu")
        if cpu is not None and "cpu" not in self.v2_controllers:
            _write(cpu / "cpu.shares", str(limits.cpu_shares()))
            if limits.cpu_quota_us():
                _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _write(cpu / "cpu.cfs_quota_us", str(limits.cpu_quota_us()))
        memory = cgroup.folders.get("memory")
        if memory is not None and "memory" not in self.v2_controllers and limits.memory_limit_bytes:
            _write(memory / "memory.limit_in_bytes", str(limits.memory_limit_bytes))

    def leftovers(self) -> Iterator[PodCgroup]:
        """Every pod cgroup under the subtree (left by an earlier server on this store)."""
        seen: dict[str, dict[str, Path]] = {}
        for kind, root in self.roots.items():
            for job_folder in _subfolders(root):
                for pod_folder in _subfolders(job_folder):
                    seen.setdefault(f"{job_folder.name}/{pod_folder.name}", {})[kind] = pod_folder
        for name, folders in sorted(seen.items()):
            yield PodCgroup(name, folders)

    def kill_leftovers(self, timeout: float) -> int:
        """Kill every process an earlier server left in the subtree; how many would not die."""
        pods = list(self.leftovers())
        for pod in pods:
            pod.kill()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(not pod.empty() for pod in pods):
            time.sleep(0.02)
        stuck = sum(len(pod.pids()) for pod in pods if not pod.empty())
        for pod in pods:
            if pod.empty():
                pod.remove()
        return stuck

    def remove(self) -> None:
        """Remove the subtree's empty folders (a graceful stop leaves no trace)."""
        for root in self.roots.values():
            for job_folder in _subfolders(root):
                for pod_folder in _subfolders(job_folder):
                    _rmdir(pod_folder)
                _rmdir(job_folder)
            _rmdir(root)


def _subfolders(folder: Path) -> Iterable[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def join(procs_files: list[str]) -> None:
    """Move the calling process into a pod's cgroups (runs in the child, before it drops privileges)."""
    pid = str(os.getpid()).encode()
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)
