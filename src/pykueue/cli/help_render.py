"""Renders every command's help as typer prints it, for `help_cache` (``--write`` keeps it).

python -m pykueue.cli.help_render --write    # after changing a command's options or help
python -m pykueue.cli.help_render            # exit 1 when help.json is stale
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

from pykueue.cli import help_cache
from pykueue.cli import main as cli_main

WIDTH = "80"  # click wraps help at 80 columns at most


def render() -> dict[str, str]:
    """Every command's help as typer prints it at 80 columns, by command path."""
    import typer

    os.environ["COLUMNS"] = WIDTH
    app = cli_main.build_app([])
    out: dict[str, str] = {}
    for path in _paths(typer.main.get_command(app), ()):
        if path and (path[0] in cli_main.QUICK or path[0] in cli_main.QUICK_GROUPS):
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
        help_cache.CACHE.write_text(json.dumps(texts, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {len(texts)} help texts to {help_cache.CACHE}")
        return 0
    return 0 if help_cache.lookup_all() == texts else 1


if __name__ == "__main__":
    raise SystemExit(main())
