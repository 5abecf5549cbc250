"""The `start_server` fixture: real `pykueue up` processes, always killed with their pods afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .helpers import Server


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(config: Path | None = None, name: str = "server") -> Server:
        root = tmp_path / name
        root.mkdir(parents=True, exist_ok=True)
        server = Server(root, config)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()
