"""`pykueue up`: start standalone pykueue (store, engine, executor, HTTP API) in this process.

The server lives in `pykueue.standalone`, a layer the CLI does not import; `up`
replaces this process with ``python -m pykueue.standalone`` (same PID, so a
supervisor or ``kill -9`` reaches the server itself), after choosing the
defaults a user expects: the data folder under ``$XDG_DATA_HOME`` and the
client config the other commands read.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import typer

from pykueue import paths

DEMO_CONFIG = (
    Path(__file__).resolve().parent.parent / "examples" / "standalone" / "config.yaml"
)  # in the wheel


def register(app: typer.Typer) -> None:
    app.command("up")(up)


def up(
    data: Path = typer.Option(
        None, "--data", help="Folder of the store and logs (default: $XDG_DATA_HOME/pykueue)."
    ),
    port: int = typer.Option(8642, "--port", help="Port of the HTTP API (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on; loopback unless you mean it."
    ),
    config: Path = typer.Option(
        None, "--config", help="Node GPUs, manifests to apply at start, demo phases."
    ),
    demo: bool = typer.Option(False, "--demo", help="Apply the config's demo jobs and show every decision."),
    quiet: bool = typer.Option(False, "--quiet", help="Do not print decisions and events."),
    socket: Path = typer.Option(
        None,
        "--socket",
        help="Unix socket for local users, who need no token (default: /run/pykueue/pykueue.sock as root).",
    ),
    work_dir: Path = typer.Option(
        None,
        "--work-dir",
        help="Where jobs without a workingDir get a folder of their own (default: outside the data folder).",
    ),
) -> None:
    """Run standalone pykueue until Ctrl-C: queues, quotas and preemption for jobs on this machine."""
    if demo and config is None and DEMO_CONFIG.exists():
        config = DEMO_CONFIG
    throwaway = demo and data is None
    if data is None:
        # A demo starts from nothing every time, and leaves nothing behind; a real server keeps its state.
        data = Path(tempfile.mkdtemp(prefix="pykueue-demo-")) if demo else paths.data_home()
    if config is not None and not config.exists():
        typer.echo(f"error: {config}: no such config file", err=True)
        raise typer.Exit(1)
    argv = [
        sys.executable,
        "-m",
        "pykueue.standalone",
        "--data",
        str(data),
        "--host",
        host,
        "--port",
        str(port),
    ]
    if not demo:
        # A demo keeps its client config in its own folder: the user's CLI stays with the user's server.
        argv += ["--client-config", str(paths.client_config_path())]
    if config is not None:
        argv += ["--config", str(config)]
    if demo:
        # A demo never takes the machine's shared socket, nor leaves folders outside its own.
        socket = socket or data / "pykueue.sock"
        work_dir = work_dir or data.parent / f"{data.name}-work"
    if socket is not None:
        argv += ["--socket", str(socket)]
    if work_dir is not None:
        argv += ["--work-dir", str(work_dir)]
    if demo:
        argv.append("--demo")
    if throwaway:
        argv.append("--throwaway")
    if quiet:
        argv.append("--quiet")
    sys.stdout.flush()
    os.execv(sys.executable, argv)
