"""Local Unix users that jobs run as: looked up, or created on first use by a server running as root.

A job runs as its owner (docs/standalone.md, "Security model"): the Unix user
who submitted it over the server's socket, the Unix user an identity is
mapped to, or a system user made for that identity (``<prefix><identity>``,
no login shell, no home folder of its own). Only root can start a process as
another user, so a server that is not root runs every job as itself.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAX_USER_NAME = 32  # useradd's limit on Linux
_NOT_ALLOWED = re.compile(r"[^a-z0-9_-]")


class AccountError(Exception):
    """A user cannot be found or made; the message says which and why."""


@dataclass(frozen=True, slots=True)
class RunAs:
    """Who a pod's processes are: user, primary group, supplementary groups."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    name: str
    home: str

    @property
    def is_root(self) -> bool:
        return self.uid == 0


def _of(entry: pwd.struct_passwd) -> RunAs:
    try:
        groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    except OSError:
        groups = (entry.pw_gid,)
    return RunAs(entry.pw_uid, entry.pw_gid, groups, entry.pw_name, entry.pw_dir)


def by_uid(uid: int) -> RunAs | None:
    try:
        return _of(pwd.getpwuid(uid))
    except KeyError:
        return None


def by_name(name: str) -> RunAs | None:
    """A user by name, or by number written as digits."""
    if name.isdigit():
        return by_uid(int(name))
    try:
        return _of(pwd.getpwnam(name))
    except KeyError:
        return None


def current() -> RunAs:
    """The server's own user (a uid without a passwd entry still runs, named by its number)."""
    uid = os.getuid()
    found = by_uid(uid)
    if found is not None:
        return found
    return RunAs(uid, os.getgid(), tuple(os.getgroups()), str(uid), os.environ.get("HOME", "/"))


def can_switch_users() -> bool:
    return os.geteuid() == 0


def user_name_for(prefix: str, identity: str) -> str:
    """``<prefix><identity>``, made a valid Linux user name (shortened with a hash when too long)."""
    base = _NOT_ALLOWED.sub("-", f"{prefix}{identity}".lower())
    if not re.match(r"[a-z_]", base):
        base = f"u{base}"
    if len(base) <= MAX_USER_NAME:
        return base
    digest = hashlib.sha256(identity.encode()).hexdigest()[:6]
    return f"{base[: MAX_USER_NAME - 7]}-{digest}"


def ensure_user(name: str, home: Path) -> RunAs:
    """The system user ``name``, created (with a group of its own) if it does not exist yet."""
    found = by_name(name)
    if found is not None:
        return found
    useradd = shutil.which("useradd") or next(
        (p for p in ("/usr/sbin/useradd", "/sbin/useradd") if os.path.exists(p)), None
    )
    if useradd is None:
        raise AccountError(f"cannot create Unix user {name}: useradd is not installed")
    nologin = next((p for p in ("/usr/sbin/nologin", "/sbin/nologin") if os.path.exists(p)), "/bin/false")
    command = [useradd, "--system", "--no-create-home", "--home-dir", str(home), "--shell", nologin]
    command += ["--user-group", name]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    found = by_name(name)  # another server may have made it meanwhile: that is as good
    if found is None:
        raise AccountError(f"cannot create Unix user {name}: {result.stderr.strip() or result.returncode}")
    return found
