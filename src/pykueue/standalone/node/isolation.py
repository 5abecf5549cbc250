"""How a local pod is fenced in: whose user it runs as, where, with what environment, in which cgroup.

    user         the job's owner (`accounts`), recorded on the Job by the server when it was
                 submitted (``pykueue.io/run-as-uid``); a server that is not root runs every
                 job as itself and says so at start-up
    folder       the container's ``workingDir`` when the owner may enter it, else a folder of
                 the job's own, ``<work root>/<namespace>/<job>-<uid>``, mode 0700, owned by the
                 owner, outside the server's data folder; every folder above it that the server
                 makes or owns is 0711, so owners pass through without listing; a long job name
                 is shortened with a hash (`bounded`)
    environment  only what the Job sets plus a documented minimum (PATH, HOME, USER, LOGNAME,
                 LANG, the PYKUEUE_* variables, JOB_COMPLETION_INDEX, CUDA_VISIBLE_DEVICES);
                 nothing of the server's own environment
    cgroup       one per pod (`cgroups`), so every process it starts, detached or not, stops
                 with it; without cgroups, its process group, its session and every process that
                 still carries its marker variable

The user switch, the cgroup and the folder are entered in the child between
fork and exec (`launcher`), so the command never runs a single instruction as
the server's user or outside its cgroup.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pykueue.api.access import RUN_AS_UID_ANNOTATION, RUN_AS_USER_ANNOTATION
from pykueue.standalone.node import accounts, cgroups
from pykueue.store.base import Key, Manifest

SERVER_ANNOTATION_PREFIX = "pykueue.io/"
POD_MARKER_ENV = "PYKUEUE_POD"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOT_ISOLATED_WARNING = (
    "this server is not running as root: every job runs as uid {uid} ({name}), the server's own user, "
    "so tenants are not isolated from each other or from the server's data folder"
)


def store_id(db_path: Path) -> str:
    """A short, stable name for one store file (cgroup and work folder names)."""
    return hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:12]


SYSTEM_WORK_BASE = Path("/var/lib/pykueue")
NAME_LIMIT = 100  # a job's share of one file name (a Linux name may have 255 bytes)


def default_work_root(data_dir: Path, db_path: Path) -> Path:
    """Outside the data folder: /var/lib/pykueue/<store id>/work as root, else beside the data folder."""
    if accounts.can_switch_users():
        return SYSTEM_WORK_BASE / store_id(db_path) / "work"
    return data_dir.resolve().parent / f"{data_dir.resolve().name}-work"


def bounded(name: str, limit: int = NAME_LIMIT) -> str:
    """``name`` when it has at most ``limit`` characters, else its head and a hash of the whole.

    A Job's name may have 253 characters, more than a file or cgroup name can hold
    with the uid and index added; the hash keeps two long names that share a head apart.
    """
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: limit - len(digest) - 1]}-{digest}"


class OwnerChanged(accounts.AccountError):
    """The job's recorded uid now belongs to another user name: it is not the job's owner."""


@dataclass
class Isolation:
    """The executor's fences, decided once at start-up."""

    work_root: Path
    switch_users: bool = field(default_factory=accounts.can_switch_users)
    cgroups: cgroups.CgroupTree | None = None
    server: accounts.RunAs = field(default_factory=accounts.current)

    @staticmethod
    def detect(db_path: Path, work_root: Path, use_cgroups: bool = True) -> Isolation:
        tree = cgroups.CgroupTree.detect(store_id(db_path)) if use_cgroups else None
        return Isolation(work_root=work_root, cgroups=tree)

    def prepare(self) -> None:
        """Create the work root (0711: others may pass through to their own folder, not list it).

        Folders on the way that it creates are 0711 too (the server's umask, 077, would
        close them to every owner); so are those of the default root under /var/lib/pykueue,
        which are pykueue's own even when an earlier server made them.
        """
        for folder in [*reversed(self.work_root.parents), self.work_root]:
            if folder.is_dir():
                if folder.is_relative_to(SYSTEM_WORK_BASE) and folder.stat().st_uid == self.server.uid:
                    os.chmod(folder, 0o711)
                continue
            try:
                folder.mkdir(mode=0o711)
            except FileExistsError:
                if not folder.is_dir():
                    raise  # a file in the way: the OSError names it
                continue  # made meanwhile by someone else: theirs to set
            os.chmod(folder, 0o711)
        info = self.work_root.stat()
        if info.st_uid != self.server.uid:
            raise PermissionError(
                f"work folder {self.work_root} belongs to uid {info.st_uid}, not to this server "
                f"(uid {self.server.uid}); pass another --work-dir"
            )
        os.chmod(self.work_root, 0o711)

    def summary(self) -> list[str]:
        """What start-up says about isolation: one line each, warnings first."""
        lines = []
        if not self.switch_users:
            lines.append(
                "warning: " + NOT_ISOLATED_WARNING.format(uid=self.server.uid, name=self.server.name)
            )
        else:
            lines.append("jobs run as their owners' Unix users")
            blocked = unreachable_ancestor(self.work_root)
            if blocked is not None:
                lines.append(
                    f"warning: {blocked} is not searchable by other users, so jobs of other users cannot "
                    f"enter their folders under {self.work_root}; pass --work-dir"
                )
        if self.cgroups is None:
            lines.append("warning: " + cgroups.FALLBACK_WARNING)
        else:
            lines.append(self.cgroups.describe())
        return lines

    # ------------------------------------------------------------ per pod

    def run_as(self, job: Manifest) -> accounts.RunAs:
        """The job's owner, as recorded by the server (its own user when it cannot switch)."""
        if not self.switch_users:
            return self.server
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        recorded = str(annotations.get(RUN_AS_UID_ANNOTATION, ""))
        if not recorded:
            return self.server  # submitted by the server itself (its config), or before owners were kept
        if not recorded.isdigit():
            raise accounts.AccountError(f"the job's {RUN_AS_UID_ANNOTATION} is not a uid: {recorded!r}")
        name = str(annotations.get(RUN_AS_USER_ANNOTATION, ""))
        found = accounts.by_uid(int(recorded))
        if found is None:
            who = f"{name} (uid {recorded})" if name else f"uid {recorded}"
            raise accounts.AccountError(f"the job's owner, {who}, no longer exists on this machine")
        if name and found.name != name:
            # The user was deleted and its uid given to another: running as that uid would run
            # one user's job as someone else.
            raise OwnerChanged(
                f"the job's owner was {name} (uid {recorded}) but uid {recorded} is now {found.name}; "
                f"refusing to run the job as another user"
            )
        return found

    def job_folder(self, key: Key, job: Manifest) -> Path:
        uid = str((job.get("metadata") or {}).get("uid") or "")[:8] or "nouid"
        return self.work_root / key.namespace / f"{bounded(key.name)}-{uid}"

    def make_job_folder(self, key: Key, job: Manifest, owner: accounts.RunAs) -> Path:
        parent = self.work_root / key.namespace
        parent.mkdir(exist_ok=True)
        os.chmod(parent, 0o711)  # the server's umask (077) would keep every owner out
        folder = self.job_folder(key, job)
        folder.mkdir(exist_ok=True, mode=0o700)
        if self.switch_users:
            os.chown(folder, owner.uid, owner.gid)
        return folder

    def remove_job_folder(self, key: Key, job: Manifest) -> None:
        folder = self.job_folder(key, job)
        # rmtree does not follow the symlinks a job may have left in its folder.
        shutil.rmtree(folder, ignore_errors=True)

    def environment(
        self,
        owner: accounts.RunAs,
        folder: Path,
        container: Manifest,
        variables: dict[str, str],
        fields: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The documented minimum, then the container's ``env``, then pykueue's own.

        An ``env`` item is its plain ``value``, or a ``valueFrom.fieldRef`` whose
        ``fieldPath`` is one of ``fields`` (the pod's name, labels and annotations as the
        executor knows them); any other ``valueFrom`` is left out.
        """
        home = owner.home if _owns(owner, owner.home) else str(folder)
        env = {"PATH": BASE_PATH, "HOME": home, "USER": owner.name, "LOGNAME": owner.name, "LANG": "C.UTF-8"}
        for item in container.get("env") or []:
            if not isinstance(item, dict) or "name" not in item:
                continue
            if "value" in item:
                env[str(item["name"])] = str(item["value"])
                continue
            ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if fields and isinstance(ref, str) and ref.replace('"', "'") in fields:
                env[str(item["name"])] = fields[ref.replace('"', "'")]
        env.update(variables)
        return env


def _owns(owner: accounts.RunAs, folder: str) -> bool:
    """Whether ``folder`` is a directory of the owner's (a HOME they can write to)."""
    try:
        info = os.stat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == owner.uid


def unreachable_ancestor(folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` that other users cannot pass through, if any."""
    for part in [*reversed(folder.resolve().parents), folder.resolve()]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return part
    return None


def sweep(session: int, marker: str) -> int:
    """Without cgroups: SIGKILL what a pod left behind (its session, and its marker); how many."""
    needle = marker.encode()
    own = os.getpid()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == own:
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            sid = int(fields[3])
            with open(f"/proc/{pid}/environ", "rb") as handle:
                marked = needle in handle.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if sid == session or marked:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed
