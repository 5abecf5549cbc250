"""`pykueue dashboard`: the web dashboard of a Kubernetes cluster, read-only, in its own process.

It lists and watches the queueing kinds and Workloads (`kube.cluster_view`), never
schedules and never writes, so it can run beside any Kueue controller, pykueue's or
upstream's, with read-only RBAC. Callers bring a Kubernetes bearer token; what each sees
is decided by the API server, as for the visibility API (docs/dashboard.md).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import typer

from pykueue.cli.controller_command import connect
from pykueue.errors import PykueueError
from pykueue.kube import health
from pykueue.kube.cluster_view import ClusterView
from pykueue.reconcilers import metrics


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)


def dashboard(
    kubeconfig: Path | None = typer.Option(
        None,
        "--kubeconfig",
        help="kubeconfig file; without it $KUBECONFIG, else the pod's service account, else ~/.kube/config.",
    ),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context (default: current)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve the dashboard on."),
    port: int = typer.Option(8090, "--port", help="Port to serve the dashboard on (0: any free port)."),
    authorize: bool = typer.Option(
        True,
        "--authorize/--no-authorize",
        help="Ask the API server who each caller is and what it may read (--no-authorize: everyone sees "
        "everything; for a trusted network only).",
    ),
    log_level: str = typer.Option("WARNING", "--log-level", help="DEBUG, INFO, WARNING or ERROR."),
) -> None:
    """Serve a read-only web dashboard of a Kubernetes cluster's queues and workloads."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_serve(kubeconfig, context, host, port, authorize))
    except PykueueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


async def _serve(kubeconfig: Path | None, context: str | None, host: str, port: int, authorize: bool) -> None:
    store = connect(kubeconfig, context)
    view = ClusterView(store)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    app = health.create_app(
        metrics.Metrics(state=lambda: view.state),
        state=lambda: view.state,
        ready=lambda: view.synced,
        authorizer=health.kube_authorizer(store.request) if authorize else None,
        workloads=view.workloads,
        estimated=view.estimated_start,
        cached=view.admission.cache.get,
    )
    server = health.HealthServer(app, host, port)
    await server.start()
    print(
        f"pykueue dashboard: http://{host}:{server.port}/dashboard  (read-only, {store.config.server})",
        flush=True,
    )
    try:
        await view.run(stop)
    finally:
        await server.stop()
        await store.close()
