"""Entry point of the `pykueue` command: one typer app, one module per command group.

Each command module exposes `register(app)`. Only the module of the command
being run is imported: the server, controller and simulator stacks take a
second or more to import, and `pykueue get jobs` needs none of them. Help, an
unknown command and shell completion import them all, so every command is
listed. Adding a command means one line in `COMMANDS`.

`pykueue version`, `--version`, the read-only commands (`get`, `describe`,
`logs`, cli/queries.py) and `policy` (cli/policy_command.py) do not even import typer, which brings click and pydantic.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pykueue

if TYPE_CHECKING:
    import typer

COMMANDS: dict[str, str] = {
    # command -> module of pykueue.cli that registers it
    "validate": "validate_command",
    "scenario": "scenario_command",
    "demo": "demo_command",
    "simulate": "simulate_command",
    "plan": "simulate_command",
    "up": "up_command",
    "submit": "standalone_commands",
    "apply": "standalone_commands",
    "delete": "standalone_commands",
    "get": "queries",
    "describe": "queries",
    "logs": "queries",
    "policy": "policy_command",
    "report": "queries",
    "stop": "standalone_commands",
    "resume": "standalone_commands",
    "token": "standalone_commands",
    "controller": "controller_command",
    "install": "controller_command",
    "dashboard": "dashboard_command",
    "manifests": "manifests_command",
    "dev-cluster": "devcluster_command",
}
COMPLETION_VARIABLE = "_PYKUEUE_COMPLETE"
# Read-only client commands run without typer at all (cli/queries.py says why).
QUICK = frozenset({"get", "describe", "logs", "report"})
QUICK_GROUPS = frozenset({"policy"})  # argparse groups of their own (cli/policy_command.py)


VERSION_ARGV = (["version"], ["--version"])


def version() -> None:
    """Print pykueue's version."""
    print(pykueue.__version__)


def _show_version(value: bool) -> None:
    if value:
        import typer

        version()
        raise typer.Exit()


def _options_callback() -> Callable[..., None]:
    import typer

    def _options(
        show_version: bool = typer.Option(
            False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """Kueue's job queueing in Python: quotas, cohorts, fair sharing and preemption."""

    return _options


def _wanted(argv: list[str]) -> str | None:
    """The command the arguments name (the first word that is not an option), if any."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_app(argv: list[str]) -> typer.Typer:
    """The app with the commands ``argv`` needs: the one it names, or all of them."""
    import typer

    app = typer.Typer(
        name="pykueue",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
    )
    app.callback()(_options_callback())
    app.command("version")(version)
    wanted = _wanted(argv)
    if COMPLETION_VARIABLE in os.environ:
        modules = list(dict.fromkeys(COMMANDS.values()))
    elif wanted == "version" or (wanted is None and "--version" in argv):
        modules = []
    elif wanted in COMMANDS:
        modules = [COMMANDS[wanted]]
    else:  # help, or a command that does not exist: list them all
        modules = list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        importlib.import_module(f"pykueue.cli.{module}").register(app)
    return app


def main() -> None:
    """Run the CLI; a bug shows a traceback, bad input never does (commands catch InputError).

    Output piped into a reader that stops early (``pykueue describe ... | head``) ends the
    command quietly with 141, as a program killed by SIGPIPE, instead of a BrokenPipeError."""
    try:
        try:
            _run(sys.argv[1:])
        finally:
            sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)


def _run(argv: list[str]) -> None:
    if COMPLETION_VARIABLE not in os.environ:
        if argv in VERSION_ARGV:
            version()
            sys.exit(0)
        if argv and argv[0] in QUICK:
            from pykueue.cli import queries

            sys.exit(queries.main(argv))
        if argv and argv[0] in QUICK_GROUPS:
            from pykueue.cli import policy_command

            sys.exit(policy_command.main(argv))
    sys.exit(build_app(argv)())


def __getattr__(name: str) -> typer.Typer:
    """``pykueue.cli.main.app``: the app with every command (for tests and tools that import it)."""
    if name == "app":
        return build_app([])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
