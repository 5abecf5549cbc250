"""Entry point of the `pykueue` command: one typer app, one module per command group.

Each command module exposes `register(app)`; this file only wires them up, so
adding a command never touches another command's code.
"""

from __future__ import annotations

import sys

import typer

from pykueue.cli import (
    controller_command,
    demo_command,
    devcluster_command,
    manifests_command,
    scenario_command,
    simulate_command,
    standalone_commands,
    up_command,
    validate_command,
)

app = typer.Typer(
    name="pykueue",
    help="Kueue's job queueing in Python: quotas, cohorts, fair sharing and preemption.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMANDS = (
    validate_command,
    scenario_command,
    demo_command,
    simulate_command,
    up_command,
    standalone_commands,
    controller_command,
    manifests_command,
    devcluster_command,
)
for module in COMMANDS:
    module.register(app)


@app.command()
def version() -> None:
    """Print pykueue's version."""
    import pykueue

    typer.echo(pykueue.__version__)


def main() -> None:
    """Run the CLI; a bug shows a traceback, bad input never does (commands catch InputError)."""
    sys.exit(app())
