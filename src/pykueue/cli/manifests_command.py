"""`pykueue manifests`: print what a cluster needs to run pykueue, as multi-document YAML.

The CRDs (generated from the models, converting v1beta1 through the webhook
Service), least-privilege RBAC, the webhook Secret and configurations, the Service and
the Deployment; see `pykueue.kube.deploy` for what each holds and why. Pipe it to
``kubectl apply --server-side -f -`` or to ``pykueue install -f -``.

Operations are opt-in: ``--metrics-port N`` opens the controller's plain-HTTP port
(metrics, probes, visibility) in the container and adds a metrics Service on N;
``--leader-elect`` runs two replicas that share a Lease; ``--service-monitor`` adds a
Prometheus Operator ServiceMonitor for the metrics Service (the cluster needs the
``monitoring.coreos.com`` CRDs for it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
import yaml

from pykueue.api import configuration
from pykueue.errors import PykueueError
from pykueue.kube import deploy
from pykueue.reconcilers import integrations


def render_yaml(
    namespace: str = "kueue-system",
    image: str = deploy.DEFAULT_IMAGE,
    metrics_port: int = 0,
    leader_elect: bool = False,
    service_monitor: bool = False,
    config_text: str = "",
) -> str:
    """The manifests as one multi-document YAML text."""
    frameworks = integrations.DEFAULT_FRAMEWORKS
    if config_text:
        cfg = configuration.parse(yaml.safe_load(config_text), "--config")
        frameworks = tuple(cfg.integrations.frameworks) or frameworks
        integrations.registry(frameworks)  # an unknown framework is refused here, not in the cluster
    config = deploy.DeployConfig(
        namespace=namespace,
        image=image,
        metrics_port=metrics_port,
        leader_elect=leader_elect,
        service_monitor=service_monitor,
        frameworks=frameworks,
        configuration=config_text,
    )
    return yaml.safe_dump_all(deploy.render(config), sort_keys=False, default_flow_style=False)


def manifests(
    namespace: str = typer.Option("kueue-system", "--namespace", "-n", help="Namespace of the controller."),
    image: str = typer.Option(deploy.DEFAULT_IMAGE, "--image", help="Controller image (see the Dockerfile)."),
    metrics_port: int = typer.Option(
        0,
        "--metrics-port",
        min=0,
        max=65535,
        help="Serve /metrics, the probes and the visibility API on this port, behind a metrics Service (0: none).",
    ),
    leader_elect: bool = typer.Option(
        False,
        "--leader-elect/--no-leader-elect",
        help="Run the controller with --leader-elect and two replicas (one writes, one stands by).",
    ),
    service_monitor: bool = typer.Option(
        False,
        "--service-monitor/--no-service-monitor",
        help="Add a Prometheus Operator ServiceMonitor for the metrics Service (needs --metrics-port).",
    ),
    config_file: Path | None = typer.Option(
        None,
        "--config",
        help="Kueue Configuration file: put in a ConfigMap for the controller; its integrations set RBAC and webhooks.",
    ),
) -> None:
    """Print the CRDs, RBAC, webhook configurations, Deployment and Service as YAML."""
    if service_monitor and not metrics_port:
        raise typer.BadParameter("--service-monitor needs --metrics-port", param_hint="--service-monitor")
    text = config_file.read_text() if config_file else ""
    try:
        out = render_yaml(namespace, image, metrics_port, leader_elect, service_monitor, text)
    except (PykueueError, ValueError) as exc:
        typer.echo(f"error: {config_file}: {exc}", err=True)
        raise typer.Exit(2) from None
    sys.stdout.write(out)


def register(app: typer.Typer) -> None:
    """Add `manifests` to the app."""
    app.command("manifests")(manifests)
