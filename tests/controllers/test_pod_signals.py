"""Stopping a pod signals each of its processes once, the ones that left its process group too.

A second SIGTERM runs a program's handler a second time: a shell trap that saves a checkpoint
saves it twice. The old code signalled the cgroup's members and then the process group, so the
group's members got two; whether the program saw two depended on timing, and CI caught one run
that did. The spy below records whom each call reaches (it calls the real functions), because the
kernel folds two pending SIGTERMs into one and a program alone cannot count them reliably.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from pykueue.standalone.node import cgroups
from pykueue.standalone.node.cgroups import CgroupTree, Limits
from pykueue.standalone.node.launcher_client import LaunchedProcess
from pykueue.standalone.node.pod_processes import Pod
from pykueue.store.base import Key

# The leader, a child in its group, and a child that started a session of its own.
SCRIPT = "sleep 60 & setsid sleep 60 & wait"


def test_each_process_of_a_pod_gets_one_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = CgroupTree.detect(f"test-{uuid.uuid4().hex[:8]}")
    assert tree is not None, "the tests run where pykueue may create cgroups (as CI does)"
    cgroup = tree.pod("job", 0, Limits())
    leader = subprocess.Popen(
        ["sh", "-c", SCRIPT], start_new_session=True, preexec_fn=lambda: cgroups.join(cgroup.procs_files)
    )
    try:
        groups = _wait_for_members(cgroup)
        members = list(groups)
        reached: Counter[int] = Counter()
        real_kill, real_killpg = os.kill, os.killpg

        def kill(pid: int, sig: int) -> None:
            reached[pid] += 1
            real_kill(pid, sig)

        def killpg(group: int, sig: int) -> None:
            reached.update(pid for pid, g in groups.items() if g == group)
            real_killpg(group, sig)

        monkeypatch.setattr(os, "kill", kill)
        monkeypatch.setattr(os, "killpg", killpg)
        asyncio.run(_signal_pod(leader.pid, cgroup, tmp_path))
        monkeypatch.undo()
        assert reached == Counter({pid: 1 for pid in members})
        _wait_until_empty(cgroup)  # and each one it reached has stopped
    finally:
        cgroup.kill()
        leader.wait(timeout=10)
        _wait_until_empty(cgroup)
        cgroup.remove()
        tree.remove()


async def _signal_pod(pid: int, cgroup: cgroups.PodCgroup, folder: Path) -> None:
    """A Pod as the executor holds one (its process handle needs a running loop)."""
    pod = Pod(
        job=Key("Job", "default", "job"),
        index=0,
        process=LaunchedProcess(pid),
        devices=[],
        log_path=folder / "log",
        grace=1.0,
        user="",
        marker="",
        cgroup=cgroup,
    )
    pod.signal_all(signal.SIGTERM)


def _wait_for_members(cgroup: cgroups.PodCgroup) -> dict[int, int]:
    """The pod's three processes and their process groups, once the third has its own."""
    deadline = time.monotonic() + 10
    groups: dict[int, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            groups = {pid: os.getpgid(pid) for pid in cgroup.pids()}
            if len(groups) == 3 and len(set(groups.values())) == 2:
                return groups
        time.sleep(0.02)
    raise AssertionError(f"the pod's processes and their groups: {groups}")


def _wait_until_empty(cgroup: cgroups.PodCgroup) -> None:
    deadline = time.monotonic() + 10
    while not cgroup.empty():
        assert time.monotonic() < deadline, f"the pod's cgroup still holds {cgroup.pids()}"
        time.sleep(0.02)
