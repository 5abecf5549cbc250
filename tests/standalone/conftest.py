"""Fixtures: real `pykueue up` processes, and real Unix users; everything removed afterwards.

Each test gets its own prefix for the users a server makes on first use
(``isolation.userPrefix``), so teardown removes exactly the users that test's
servers and `unix_user` made, and no test sees another's.
"""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from browsing.browser import Browser

from .helpers import Server


@pytest.fixture
def user_prefix() -> Iterator[str]:
    prefix = f"pkt{secrets.token_hex(3)}-"
    yield prefix
    for entry in pwd.getpwall():
        if entry.pw_name.startswith(prefix):
            subprocess.run(["userdel", entry.pw_name], capture_output=True, check=False)


@pytest.fixture
def unix_user(user_prefix: str) -> Callable[[str], pwd.struct_passwd]:
    """Make a real local user (removed with the test's prefix); needs root."""

    def make(name: str) -> pwd.struct_passwd:
        if os.geteuid() != 0:
            pytest.fail("this test makes Unix users and runs jobs as them: run the suite as root, as CI does")
        full = f"{user_prefix}{name}"
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", full],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(full)

    return make


def _with_prefix(config: Path | None, folder: Path, prefix: str) -> Path:
    raw = yaml.safe_load(config.read_text()) if config is not None else {}
    raw = raw or {}
    raw.setdefault("isolation", {}).setdefault("userPrefix", prefix)
    if config is not None:
        base = config.parent
        raw["manifests"] = [str(base / p) for p in raw.get("manifests") or []]
        raw["demo"] = [{**d, "file": str(base / d["file"])} for d in raw.get("demo") or []]
    path = folder / "config.with-prefix.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def start_server(tmp_path: Path, user_prefix: str) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(
        config: Path | None = None,
        name: str = "server",
        extra_args: tuple[str, ...] = (),
        default_work_dir: bool = False,
    ) -> Server:
        root = tmp_path / name
        root.mkdir(parents=True, exist_ok=True)
        config = _with_prefix(config, root, user_prefix)
        server = Server(root, config, extra_args=extra_args, default_work_dir=default_work_dir)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def browser() -> Iterator[Browser]:
    """A real Chromium, closed after the test."""
    with Browser() as chromium:
        yield chromium
