"""Every command's ``--help``, rendered once and shipped, so asking for help imports no typer.

typer (with click and pydantic) takes 0.5-2 s to import, and a help text needs none of it:
``pykueue submit --help`` prints the text kept in ``help.json``. The file is generated from
the live commands (``python -m pykueue.cli.help_render --write``) and a test renders them
again and compares, so a changed option cannot leave a stale help behind. The read-only
commands (`get`, `describe`, `logs`, `report`, `policy`) print argparse's help themselves
and are not kept here.
"""

from __future__ import annotations

import json
from pathlib import Path

CACHE = Path(__file__).with_name("help.json")


def lookup(words: list[str]) -> str | None:
    """The help of the command ``words`` names (e.g. ["scenario", "run"]), if kept."""
    try:
        texts: dict[str, str] = json.loads(CACHE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no cache (a source tree mid-change): typer renders it
    return texts.get(" ".join(words))


def lookup_all() -> dict[str, str]:
    try:
        loaded: dict[str, str] = json.loads(CACHE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded
