"""The CLI loads only what the command it runs needs (start-up time is measured in docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "aiohttp",
    "httpx",
    "cryptography",
    "prometheus_client",
    "pykueue.server",
    "pykueue.controllers",
    "pykueue.engine",
    "pykueue.store",
    "pykueue.sim",
    "pykueue.api.manifests",
)


def _loaded_for(*argv: str) -> list[str]:
    code = (
        "import json, sys\n"
        "from pykueue.cli.main import build_app\n"
        f"build_app({list(argv)!r})\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {{h.split('.')[0] for h in {HEAVY!r}}})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out)
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize(
    "argv",
    [
        ("version",),
        ("--version",),
        ("get", "jobs"),
        ("describe", "workload", "x"),
        ("submit", "--queue", "main", "--", "true"),
        ("logs", "x"),
        ("token", "list"),
    ],
)
def test_client_commands_do_not_load_the_server_stack(argv: tuple[str, ...]) -> None:
    assert _loaded_for(*argv) == []


def test_help_lists_every_command_and_a_server_command_loads_what_it_needs() -> None:
    assert "pykueue.server.deploy" in _loaded_for("manifests")
    assert _loaded_for("--help"), "help imports every command module to list them"
