"""What the security tests share: a two-team server, tenants, and process lookups."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ..helpers import EXAMPLES, Server, write_config


def two_teams(tmp_path: Path, start_server: Callable[..., Server], gpus: int = 4, **config: Any) -> Server:
    """The examples' queues (research and product, 2 GPUs each, priorities batch and urgent)."""
    path = write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=gpus)
    if config:
        raw = yaml.safe_load(path.read_text())
        raw.update(config)
        path.write_text(yaml.safe_dump(raw))
    return start_server(path)


def tenant(server: Server, name: str, namespace: str, *more: str) -> str:
    created = server.cli("token", "create", name, "-n", namespace, *more)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


def processes_with(argument: str) -> list[int]:
    """PIDs whose command line has ``argument`` as one of its words."""
    found = []
    needle = argument.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue
        if needle in words:
            found.append(int(entry))
    return found


def job_state(server: Server, key: str) -> str:
    return str(server.jobs().get(key, {}).get("state", ""))
