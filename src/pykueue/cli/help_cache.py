"""Every command's ``--help``, rendered once and shipped, so asking for help imports no typer.

typer (with click and pydantic) takes 0.5-2 s to import, and a help text needs none of it:
``pykueue submit --help`` prints the text kept in ``help.json``. The file is generated from
the live commands (``python -m pykueue.cli.help_cache --write``) and a test renders them
again and compares, so a changed option cannot leave a stale help behind. The read-only
commands (`get`, `describe`, `logs`, `report`, `policy`) print argparse's help themselves
and are not kept here.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

CACHE = Path(__file__).with_name("help.json")
WIDTH = "80"  # click wraps help at 80 columns at most


def lookup(words: list[str]) -> str | None:
    """The help of the command ``words`` names (e.g. ["scenario", "run"]), if kept."""
    try:
        texts: dict[str, str] = json.loads(CACHE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no cache (a source tree mid-change): typer renders it
    return texts.get(" ".join(words))


def render() -> dict[str, str]:
    """Every command's help as typer prints it at 80 columns, by command path."""
    import typer

    from pykueue.cli import main

    os.environ["COLUMNS"] = WIDTH
    app = main.build_app([])
    out: dict[str, str] = {}
    for path in _paths(typer.main.get_command(app), ()):
        if path and (path[0] in main.QUICK or path[0] in main.QUICK_GROUPS):
            continue
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            app([*path, "--help"], prog_name="pykueue")
        out[" ".join(path)] = buffer.getvalue()
    out.pop("", None)  # the top-level help comes from main.SUMMARIES
    return out


def _paths(command: object, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = [path]
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        found.extend(_paths(sub, (*path, name)))
    return found


def main() -> int:
    texts = render()
    if sys.argv[1:] == ["--write"]:
        CACHE.write_text(json.dumps(texts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {len(texts)} help texts to {CACHE}")
        return 0
    return 0 if lookup_all() == texts else 1


def lookup_all() -> dict[str, str]:
    try:
        loaded: dict[str, str] = json.loads(CACHE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded


if __name__ == "__main__":
    raise SystemExit(main())
