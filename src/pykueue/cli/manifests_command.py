"""`pykueue manifests`: print what a cluster needs to run pykueue, as multi-document YAML.

The CRDs (generated from the models, converting v1beta1 through the webhook
Service), least-privilege RBAC, the webhook Secret and configurations, the Service and
the Deployment; see `pykueue.server.deploy` for what each holds and why. Pipe it to
``kubectl apply --server-side -f -`` or to ``pykueue install -f -``.
"""

from __future__ import annotations

import sys

import typer
import yaml

from pykueue.server import deploy


def render_yaml(namespace: str = "kueue-system", image: str = deploy.DEFAULT_IMAGE) -> str:
    """The manifests as one multi-document YAML text."""
    docs = deploy.render(deploy.DeployConfig(namespace=namespace, image=image))
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


def manifests(
    namespace: str = typer.Option("kueue-system", "--namespace", "-n", help="Namespace of the controller."),
    image: str = typer.Option(deploy.DEFAULT_IMAGE, "--image", help="Controller image (see the Dockerfile)."),
) -> None:
    """Print the CRDs, RBAC, webhook configurations, Deployment and Service as YAML."""
    sys.stdout.write(render_yaml(namespace, image))


def register(app: typer.Typer) -> None:
    """Add `manifests` to the app."""
    app.command("manifests")(manifests)
