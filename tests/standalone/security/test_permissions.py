"""Finding 5: with umask 022 the store, its journal and every log were readable by any local user."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from ..helpers import Server, job, wait_until
from .common import job_state, two_teams


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_state_is_private_whatever_the_umask(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    # An older server left a world-readable folder behind; a user's umask is the usual 022.
    data = tmp_path / "server" / "data"
    data.mkdir(parents=True)
    os.chmod(data, 0o755)
    old = data / "notes.txt"
    old.write_text("from before")
    os.chmod(old, 0o644)
    previous = os.umask(0o022)
    try:
        server = two_teams(tmp_path, start_server)
    finally:
        os.umask(previous)
    assert server.apply([job("talk", "echo hello", namespace="research")]).status_code == 200
    wait_until(lambda: job_state(server, "research/talk") == "Succeeded")

    assert _mode(server.data) == 0o700
    assert _mode(old) == 0o600
    for name in ("pykueue.db", "pykueue.db-wal", "pykueue.db-shm", "client.json"):
        assert _mode(server.data / name) == 0o600, name
    logs = list((server.data / "logs").rglob("*"))
    assert any(p.suffix == ".log" for p in logs)
    for path in logs:
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
