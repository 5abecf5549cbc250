"""Who is on the other end of the server's Unix socket, as the kernel tells it (SO_PEERCRED).

A local user needs no token: the socket's peer credentials name their uid,
which no client can forge, the way a local daemon (Slurm's, Docker's) knows its
callers. The HTTP protocol below asks for them once per connection and hands
them to every request of that connection in ``request.state.peer``; a TCP
connection has none, so its requests must carry a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

PEER_STATE_KEY = "peer"


@dataclass(frozen=True, slots=True)
class Peer:
    pid: int
    uid: int
    gid: int


def peer_of(sock: socket.socket) -> Peer | None:
    if sock.family != socket.AF_UNIX:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return Peer(pid, uid, gid)


class PeerCredentialsProtocol(H11Protocol):
    """uvicorn's h11 protocol, with the peer's credentials in each request's state."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        peer = None
        if sock is not None:
            with contextlib.suppress(OSError):
                peer = peer_of(sock)
        # A copy per connection: the shared app state must never carry one caller's identity.
        self.app_state: dict[str, Any] = {**self.app_state, PEER_STATE_KEY: peer}


def _make_open_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents 0755 whatever the umask (the server's, 077, would
    make them 0700 and keep every other local user away from the socket). Folders that already
    exist are left as their owner set them."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for created in reversed(missing):
        created.mkdir(exist_ok=True)
        os.chmod(created, 0o755)


def bind_unix_socket(path: Path) -> socket.socket:
    """A listening socket at ``path`` that every local user may connect to (callers are told apart
    by their credentials, not by file permissions). A stale socket of a dead server is replaced;
    a live one is refused."""
    _make_open_folders(path.parent)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise FileExistsError(f"{path} exists and is not a socket; pass another --socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody answers: left by a server that died
        else:
            raise FileExistsError(f"{path} is the socket of a running pykueue server; pass another --socket")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o666)
    sock.listen(128)
    sock.setblocking(False)
    return sock
