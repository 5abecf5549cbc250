"""`pykueue scenario`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this command group to the app (filled in by its issue)."""
