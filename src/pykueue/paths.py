"""Where standalone pykueue keeps things by default, shared by the server and the CLI.

data        $XDG_DATA_HOME/pykueue (~/.local/share/pykueue): the store, logs; mode 0700
client      $XDG_CONFIG_HOME/pykueue/client.json: URL, socket and admin token; mode 0600
socket      /run/pykueue/pykueue.sock for a server run as root (every local user's door),
            else $XDG_RUNTIME_DIR/pykueue.sock, else <data>/pykueue.sock
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_SOCKET = Path("/run/pykueue/pykueue.sock")


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "pykueue"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "pykueue"


def client_config_path() -> Path:
    return config_home() / "client.json"


def default_socket(data_dir: Path) -> Path:
    if os.geteuid() == 0:
        return ROOT_SOCKET
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "pykueue.sock" if runtime else data_dir / "pykueue.sock"


def well_known_sockets() -> list[Path]:
    """Where a client looks for a server's socket when nothing names one."""
    found = [ROOT_SOCKET]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        found.append(Path(runtime) / "pykueue.sock")
    found.append(data_home() / "pykueue.sock")
    return found
