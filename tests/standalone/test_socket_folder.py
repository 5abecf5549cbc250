"""The API socket's folder lets every local user through, whatever the server's umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pykueue.standalone.http.peer import bind_unix_socket


def test_the_socket_folders_the_server_creates_are_open_under_its_private_umask(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir(mode=0o700)
    os.chmod(existing, 0o700)
    path = existing / "run" / "pykueue" / "api.sock"
    old = os.umask(0o077)  # the server's umask (standalone/runtime.py)
    try:
        sock = bind_unix_socket(path)
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE((existing / "run").stat().st_mode) == 0o755
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
        assert stat.S_IMODE(path.stat().st_mode) == 0o666
        # A folder that was there already is its owner's business.
        assert stat.S_IMODE(existing.stat().st_mode) == 0o700
    finally:
        sock.close()
