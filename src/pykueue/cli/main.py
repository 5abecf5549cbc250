"""Entry point of the `pykueue` command: one typer app, one module per command group.

Each command module exposes `register(app)`. Only the module of the command
being run is imported: the server, controller and simulator stacks take a
second or more to import, and `pykueue get jobs` needs none of them. The
top-level help is printed from `SUMMARIES` without importing any command
module (a test keeps each summary equal to its command's own first help line);
an unknown command and shell completion import them all. Adding a command means
one line in `COMMANDS` and one in `SUMMARIES`.

Every help is plain text in one style (click's, as argparse prints it for the
read-only commands): typer's boxed rich help is off.

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
# command -> the first line of its help, in the order the top-level help lists them.
SUMMARIES: dict[str, str] = {
    "version": "Print pykueue's version.",
    "validate": "Validate Kueue manifests and the jobs they queue, as the API server and Kueue would.",
    "demo": "Run example queues and jobs through the engine and explain every decision.",
    "simulate": "Replay a trace (or an upstream generator file) on a quota design in virtual time.",
    "plan": "Run one trace on several quota designs and show them side by side.",
    "up": "Run standalone pykueue until Ctrl-C: queues, quotas and preemption for jobs on this machine.",
    "submit": "Submit a command as a Job: `pykueue submit --queue main --gpus 1 -- python train.py`.",
    "apply": "Create or update every object of the files, all at once or none at all.",
    "delete": "Delete one object (KIND NAME) or every object of -f files.",
    "stop": "Stop a workload (spec.active=false: evicted, not requeued) or a ClusterQueue (stopPolicy Hold).",
    "resume": "Resume a stopped workload or ClusterQueue.",
    "token": "Identities (admins only): create one and print its new token, revoke its token, list them.",
    "get": "List queues, workloads or jobs.",
    "describe": "Why a workload waits, in the cause words every view uses; its position, estimate and pods.",
    "logs": "Print the output of a job's pods.",
    "report": "Usage, cost and lost (preempted) work per tenant or queue, or quota efficiency (docs/governance.md).",
    "policy": "Policy history and rollback: who changed which queue, flavor or priority class, and undo it.",
    "controller": "Run pykueue as a Kubernetes controller: admit queued jobs and Workloads, write queue status.",
    "install": "Apply pykueue's manifests to a cluster (server-side apply), CRDs first.",
    "dashboard": "Serve a read-only web dashboard of a Kubernetes cluster's queues and workloads.",
    "manifests": "Print the CRDs, RBAC, webhook configurations, Deployment and Service as YAML.",
    "dev-cluster": "Start a local Kubernetes control plane with fake GPU nodes, the kinds' controllers and pykueue.",
    "scenario": "Run scenario files: cluster state, steps and expected decisions.",
}
ABOUT = "Kueue's job queueing in Python: quotas, cohorts, fair sharing and preemption."
HELP_ARGV: tuple[list[str], ...] = ([], ["--help"], ["-h"])
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
        pass

    _options.__doc__ = ABOUT
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
        rich_markup_mode=None,  # plain help, one style with the argparse commands'
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


def top_level_help() -> str:
    """``pykueue --help``, from `SUMMARIES`: no command module is imported to print it."""
    width = max(len(name) for name in SUMMARIES) + 2
    lines = [
        "Usage: pykueue [OPTIONS] COMMAND [ARGS]...",
        "",
        f"  {ABOUT}",
        "",
        "Options:",
        "  --version             Print the version and exit.",
        "  --install-completion  Install completion for the current shell.",
        "  --show-completion     Show completion for the current shell, to copy it or customize the installation.",
        "  --help                Show this message and exit.",
        "",
        "Commands:",
        *(f"  {name:<{width}}{summary}" for name, summary in SUMMARIES.items()),
        "",
        "Run `pykueue COMMAND --help` for a command's options.",
    ]
    return "\n".join(lines) + "\n"


def _kept_help(argv: list[str]) -> str | None:
    """``pykueue CMD [SUB] --help`` from cli/help.json, without importing typer."""
    if len(argv) < 2 or argv[-1] not in ("--help", "-h") or argv[0] in QUICK or argv[0] in QUICK_GROUPS:
        return None
    words = argv[:-1]
    if any(word.startswith("-") for word in words):
        return None  # options before --help: let the command's parser see them
    from pykueue.cli import help_cache

    return help_cache.lookup(words)


def _run(argv: list[str]) -> None:
    if COMPLETION_VARIABLE not in os.environ:
        if argv in VERSION_ARGV:
            version()
            sys.exit(0)
        if argv in HELP_ARGV:
            sys.stdout.write(top_level_help())
            sys.exit(0 if argv else 2)  # no command at all is a usage error, as before
        kept = _kept_help(argv)
        if kept is not None:
            sys.stdout.write(kept)
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
