"""`pykueue dev-cluster`: a real Kubernetes control plane on this machine, with pykueue managing it.

    etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok   (hack/kube-binaries)
    fake nodes with the capacity and labels asked for (GPUs included)        (kwok)
    the job kinds' own controllers (JobSet, LWS, KubeRay, ...)               (hack/kind-controllers)
    pykueue's CRDs, controller and webhooks                                  (in this process)
        configured with --config as `pykueue controller --config` is (e.g. DRA deviceClassMappings)

It prints the kubeconfig to use and serves until Ctrl-C, then stops everything it
started; when one of its components (a kind's controller too) exits, it says which, with
the end of its log, and stops everything (exit code 1). pykueue's webhooks and visibility
API are served on this machine's non-loopback address: the API server refuses a loopback
one as the visibility API's endpoint. It is the control plane the kube tests run on
(`pykueue.devcluster`), so what works here works there. Nothing is downloaded prebuilt: the first run builds the
binaries from Go modules (see docs/testing.md), later runs start in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import signal
import tempfile
from pathlib import Path

import typer

from pykueue.api import crd
from pykueue.cli import controller_command
from pykueue.devcluster import kinds, running
from pykueue.devcluster.controlplane import KubeCluster, NodeSpec, find_bin_dir
from pykueue.devcluster.processes import ControlPlaneError, Process, host_address
from pykueue.engine.config import EngineConfig
from pykueue.errors import PykueueError
from pykueue.reconcilers import integrations, jobframework
from pykueue.store import kubernetes

POD_FRAMEWORKS = ("pod", "deployment", "statefulset")


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{what} {value!r}: expected key=value")
        out[key] = val
    return out


def _kinds(value: str) -> list[str]:
    if value in ("", "none"):
        return []
    names = list(kinds.BY_NAME) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in kinds.BY_NAME]
    if unknown:
        raise typer.BadParameter(
            f"unknown controller(s) {', '.join(unknown)}; known: {', '.join(kinds.BY_NAME)}"
        )
    if "trainer" in names and "jobset" not in names:
        names.insert(0, "jobset")  # a TrainJob runs as a JobSet
    return names


async def _install_crds(cluster: KubeCluster) -> None:
    store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(cluster.kubeconfig))
    try:
        await controller_command.apply_all(store, crd.crds())
    finally:
        await store.close()


async def watch_components(
    cluster: KubeCluster, stop: asyncio.Event, interval: float = 1.0
) -> Process | None:
    """The first component of ``cluster`` to exit (``stop`` is then set), or None once ``stop`` is set.

    A kind's controller can exit long after its start (controller-runtime gives up on a
    watched kind whose cache does not sync after two minutes): the cluster is then not
    what dev-cluster said it was."""
    while not stop.is_set():
        gone = cluster.exited()
        if gone:
            stop.set()
            return gone[0]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
    return None


async def _serve(local: running.LocalPykueue, cluster: KubeCluster) -> None:
    stop, ready = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(watch_components(cluster, stop))
    task = asyncio.create_task(local.run(stop, ready))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if ready.is_set() and not watcher.done():
        typer.echo("pykueue is managing the cluster; Ctrl-C stops everything.")
    try:
        await task
    finally:
        waiter.cancel()
        stop.set()
    gone = await watcher
    if gone is not None:
        raise ControlPlaneError(
            f"{gone.exit_message()}\ndev-cluster stops: the cluster is not whole without it."
        )


@dataclasses.dataclass(frozen=True)
class Configured:
    """What a --config file sets for the controller dev-cluster runs (as `pykueue controller --config`)."""

    engine: EngineConfig | None = None  # None: LocalPykueue's own default
    settings: jobframework.Settings = dataclasses.field(default_factory=jobframework.Settings)
    frameworks: tuple[str, ...] = ()  # (): the defaults plus the started kinds' own


def configured(path: Path | None) -> Configured:
    """The --config file read as `pykueue controller` reads it; `typer.Exit(2)` when it is bad,
    before anything starts."""
    if path is None:
        return Configured()
    cfg, jobs = controller_command.load_configuration(path)
    engine = controller_command.engine_config(path, fair_sharing=False, nominal_first=True)
    return Configured(engine, jobs.settings, tuple(cfg.integrations.frameworks))


def dev_cluster(
    nodes: int = typer.Option(2, "--nodes", help="How many fake (kwok) nodes."),
    cpu: str = typer.Option("16", "--cpu", help="CPU of each node."),
    memory: str = typer.Option("64Gi", "--memory", help="Memory of each node."),
    gpus: int = typer.Option(0, "--gpus", help="GPUs of each node (0: none)."),
    gpu_resource: str = typer.Option("nvidia.com/gpu", "--gpu-resource", help="Resource name of the GPUs."),
    labels: list[str] = typer.Option([], "--label", help="Node label key=value (repeat)."),
    controllers: str = typer.Option(
        "jobset",
        "--controllers",
        help=f"Kind controllers to run: comma-separated of {', '.join(kinds.BY_NAME)}; 'all' or 'none'.",
    ),
    workdir: Path | None = typer.Option(
        None, "--dir", help="Where state and logs go (default: a new temp folder)."
    ),
    kubeconfig_out: Path = typer.Option(
        Path("pykueue-dev.kubeconfig"), "--kubeconfig", help="Where to write the kubeconfig."
    ),
    config_file: Path | None = typer.Option(
        None,
        "--config",
        help="Upstream Kueue's Configuration file for the controller, as `pykueue controller --config` "
        "(e.g. resources.deviceClassMappings, integrations.frameworks, featureGates).",
    ),
) -> None:
    """Start a local Kubernetes control plane with fake GPU nodes, the kinds' controllers and pykueue."""
    node_labels = _pairs(labels, "--label")
    wanted = _kinds(controllers)
    setup = configured(config_file)
    folder = workdir or Path(tempfile.mkdtemp(prefix="pykueue-dev-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        cluster = KubeCluster(find_bin_dir(), folder)
    except ControlPlaneError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        typer.echo("starting etcd, kube-apiserver, controller-manager, scheduler and kwok ...")
        cluster.start_apiserver()
        cluster.start_controllers()
        cluster.start_kwok()
        asyncio.run(_install_crds(cluster))
        frameworks: list[str] = list(setup.frameworks) or [*integrations.DEFAULT_FRAMEWORKS, *POD_FRAMEWORKS]
        for name in wanted:
            spec, served = kinds.BY_NAME[name]
            typer.echo(f"starting the {name} controller (built on first use; see hack/kind-controllers) ...")
            kinds.start(cluster, spec)
            if not setup.frameworks:  # the file's integrations.frameworks are taken as written
                frameworks.extend(served)
        capacity = {"cpu": cpu, "memory": memory, "pods": "110"}
        if gpus:
            capacity[gpu_resource] = str(gpus)
        cluster.create_nodes(
            NodeSpec(name=f"kwok-node-{i}", labels=node_labels, taints=[], capacity=capacity)
            for i in range(nodes)
        )
        cluster.create_namespace("pykueue-system")
        shutil.copyfile(cluster.kubeconfig, kubeconfig_out)
        typer.echo(f"{nodes} node(s) with {capacity}" + (f", labels {node_labels}" if node_labels else ""))
        typer.echo(f"logs: {cluster.logs_dir}")
        typer.echo(f"export KUBECONFIG={kubeconfig_out.resolve()}")
        address = host_address()
        if address is None:
            typer.echo(
                "note: this machine has no non-loopback IPv4 address, so the visibility API "
                "(kubectl get --raw /apis/visibility.kueue.x-k8s.io/..., kueuectl's positions) is not served",
                err=True,
            )
        local = running.LocalPykueue(
            kubernetes.load_kubeconfig(cluster.kubeconfig),
            webhook_namespace="pykueue-system",
            frameworks=tuple(dict.fromkeys(frameworks)),
            resync_seconds=1.0,
            webhook_host=address or "127.0.0.1",
            visibility=address is not None,
            settings=setup.settings,
        )
        if setup.engine is not None:
            local = dataclasses.replace(local, config=setup.engine)
        asyncio.run(_serve(local, cluster))
    except (ControlPlaneError, PykueueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        cluster.stop()
        typer.echo("stopped.")


def register(app: typer.Typer) -> None:
    """Add `dev-cluster` to the app."""
    app.command("dev-cluster")(dev_cluster)
