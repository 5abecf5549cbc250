"""`pykueue controller` runs pykueue as a Kubernetes controller; `pykueue install` applies its manifests.

``controller`` connects with ``--kubeconfig`` (else $KUBECONFIG, the pod's service
account or ~/.kube/config), lists and watches the queueing kinds, Workloads and Jobs, and runs
`pykueue.reconcilers.manager.Manager` until SIGTERM or SIGINT. With
``--webhooks`` (what the Deployment of ``pykueue manifests`` passes) the webhook
server of `pykueue.kube.webhooks` runs in the same event loop; its "does this
LocalQueue exist" question is answered from the controller's informer cache.

``install`` server-side-applies manifests, CRDs first, and waits until every CRD
is Established, so a queue manifest applied right after it is accepted. By default
it applies what ``pykueue manifests`` prints (`pykueue.kube.deploy.render`: CRDs,
RBAC, webhook configurations, Service, Deployment); ``--crds-only`` applies just the
CRDs, for a controller run outside the cluster; ``-f`` applies files.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
import yaml

from pykueue import gc_tuning
from pykueue.api import configuration, crd
from pykueue.engine import intake
from pykueue.engine.config import EngineConfig, FairSharing
from pykueue.errors import AlreadyExists, PykueueError, StoreError
from pykueue.kube import (
    certs,
    deploy,
    estimate_annotations,
    health,
    leader,
    local_registration,
    visibility_api,
    webhooks,
)
from pykueue.kube.deploy import INSTALL_FIELD_MANAGER
from pykueue.kube.local_registration import LOCAL_VISIBILITY_SERVICE, register_local_visibility
from pykueue.multikueue import controller as multikueue
from pykueue.reconcilers import (
    dra,
    estimating,
    integrations,
    jobframework,
    kueue_configuration,
    metrics,
    retention,
)
from pykueue.reconcilers.events import EventRecorder
from pykueue.reconcilers.manager import Manager
from pykueue.store import kubeconfig as kubeconfig_reader
from pykueue.store import kubernetes
from pykueue.store.base import Key, Manifest

log = logging.getLogger(__name__)


def connect(
    kubeconfig: Path | None, context: str | None, qps: float = 0.0, burst: int = 10
) -> kubernetes.KubernetesStore:
    """A store of the cluster of ``kubeconfig``, else $KUBECONFIG, the pod's service account or
    ~/.kube/config (controller-runtime's order; `pykueue.store.kubeconfig.default_config`)."""
    return kubernetes.KubernetesStore(
        kubeconfig_reader.default_config(kubeconfig, context), qps=qps, burst=burst
    )


@dataclass(frozen=True)
class Jobs:
    """Which job kinds are managed and which jobs of them, from the Configuration."""

    registry: jobframework.Registry
    settings: jobframework.Settings
    frameworks: tuple[str, ...]
    # The MultiKueue admission check's settings (it acts only for checks naming it).
    multikueue: multikueue.Settings = field(default_factory=multikueue.Settings)
    # objectRetentionPolicies.workloads (`pykueue.reconcilers.retention`).
    retention_policy: retention.Policy = field(default_factory=retention.Policy)
    # The configuration's featureGates, for the webhooks' gated rules (the engine reads its own).
    feature_gates: Mapping[str, bool] = field(default_factory=dict)


def jobs_of(cfg: configuration.Configuration) -> Jobs:
    """The job side of a Configuration; `jobframework.UnknownFramework` for a kind not integrated."""
    frameworks = tuple(cfg.integrations.frameworks) or integrations.DEFAULT_FRAMEWORKS
    settings = jobframework.Settings(
        manage_jobs_without_queue_name=cfg.manage_jobs_without_queue_name,
        namespace_selector=cfg.namespace_selector(),
        label_keys_to_copy=tuple(cfg.integrations.label_keys_to_copy),
        device_classes=dra.device_classes(cfg.resources.device_class_mappings),
        device_class_sources=dra.unsupported_sources(cfg.resources.device_class_mappings),
    )
    return Jobs(
        integrations.registry(frameworks),
        settings,
        frameworks,
        multikueue.settings_of(cfg.multi_kueue, cfg.namespace),
        retention.policy_of(cfg.object_retention_policies),
        dict(cfg.feature_gates),
    )


@dataclass(frozen=True)
class Operations:
    """Leader election and the metrics/probes/visibility port (0: not served)."""

    leader_elect: bool = False
    lease_namespace: str = "kueue-system"
    lease_name: str = leader.DEFAULT_LEASE_NAME
    metrics_port: int = 0
    metrics_host: str = "0.0.0.0"
    authorize_visibility: bool = True
    min_pass_seconds: float = 0.1
    max_admissions_ahead: int = 64
    # Policy history: revisions as ConfigMaps in the lease namespace (docs/governance.md).
    policy_history: bool = True


def cached_queues(manager: Manager, store: kubernetes.KubernetesStore) -> webhooks.LocalQueueLookup:
    """LocalQueue lookups for the Job webhook: the informer cache once synced, else the API."""
    ask_api = webhooks.store_lookup(store)

    async def exists(namespace: str, name: str) -> bool:
        if manager.passes == 0:
            return await ask_api(namespace, name)
        return Key("LocalQueue", namespace, name) in manager.admission.cache

    return exists


def cached_objects(manager: Manager, store: kubernetes.KubernetesStore) -> webhooks.ObjectLookup:
    """Kueue objects for the Job webhook's MultiKueue hand-over: the informer cache once synced, else the API."""
    ask_api = webhooks.store_objects(store)

    async def get(kind: str, namespace: str, name: str) -> Manifest | None:
        if manager.passes == 0:
            return await ask_api(kind, namespace, name)
        return manager.admission.cache.get(Key(kind, namespace, name))

    return get


async def serve_local_webhooks(
    store: kubernetes.KubernetesStore,
    queues: webhooks.LocalQueueLookup,
    host: str = "127.0.0.1",
    port: int = 9443,
    namespace: str = "kueue-system",
    jobs: Jobs | None = None,
    visibility: visibility_api.Source | None = None,
    on_review: webhooks.ReviewListener | None = None,
    objects: webhooks.ObjectLookup | None = None,
) -> webhooks.WebhookServer:
    """Start the webhook server of a controller outside the cluster, without registering it.

    Its certificate is for ``host`` (a self-signed CA kept in the Secret
    ``pykueue-webhook-server-cert`` of ``namespace``, created when missing, so a restart keeps
    it and every replica serves with the same CA). `register_local_webhooks` points the API
    server at it; `pykueue.kube.local_registration` decides when.
    """
    with contextlib.suppress(AlreadyExists):
        await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    jobs = jobs or jobs_of(configuration.default())
    config = webhooks.WebhookConfig(
        host=host,
        port=port,
        # The API server checks an APIService's certificate for its Service's name.
        certs=certs.CertConfig(
            namespace=namespace, hosts=(host, "localhost", f"{LOCAL_VISIBILITY_SERVICE}.{namespace}.svc")
        ),
        frameworks=jobs.frameworks,
        manage_jobs_without_queue_name=jobs.settings.manage_jobs_without_queue_name,
        feature_gates=jobs.feature_gates,
    )
    server = webhooks.WebhookServer(
        config, store, queues, visibility=visibility, on_review=on_review, objects=objects
    )
    await server.start()
    return server


def local_webhook_client(server: webhooks.WebhookServer) -> crd.WebhookClientConfig:
    """How the API server reaches ``server`` (its URL and the CA of its certificate)."""
    assert server.certificates is not None
    host = server.config.host
    bracketed = f"[{host}]" if ":" in host else host
    return crd.WebhookClientConfig(
        url=f"https://{bracketed}:{server.port}", ca_bundle=server.certificates.ca_bundle
    )


async def register_local_webhooks(
    store: kubernetes.KubernetesStore,
    server: webhooks.WebhookServer,
    namespace: str = "kueue-system",
    jobs: Jobs | None = None,
    convert: bool = True,
) -> None:
    """Point the Mutating/ValidatingWebhookConfigurations of `pykueue manifests` at ``server``
    (and, with ``convert``, the CRDs' conversion; with a visibility source, the visibility API)."""
    jobs = jobs or jobs_of(configuration.default())
    client = local_webhook_client(server)
    await store.apply(
        deploy.mutating_webhook_configuration(client, namespace, jobs.frameworks),
        field_manager=INSTALL_FIELD_MANAGER,
    )
    await store.apply(
        deploy.validating_webhook_configuration(client, namespace, jobs.frameworks),
        field_manager=INSTALL_FIELD_MANAGER,
    )
    if convert:
        await apply_all(store, crd.crds(client))
    log.info("local webhooks registered at %s", client.url)
    if server.visibility is not None:
        await register_local_visibility(store, server.config.host, server.port, namespace, client.ca_bundle)


def _local_registration(
    store: kubernetes.KubernetesStore,
    server: webhooks.WebhookServer,
    namespace: str,
    jobs: Jobs,
    elector: leader.LeaderElector | None,
) -> local_registration.LocalRegistration:
    """This replica's registration of its local webhooks (see `pykueue.kube.local_registration`)."""

    async def register() -> None:
        await register_local_webhooks(store, server, namespace, jobs)

    return local_registration.LocalRegistration(
        store,
        local_webhook_client(server).url,
        register,
        # Without leader election this replica is the only writer, so it behaves as the lease holder.
        leading=(lambda: True) if elector is None else (lambda: elector.leading),
    )


async def _until_reachable(start: Callable[[], Awaitable[None]], stop: asyncio.Event, what: str) -> None:
    """Run ``start``, again and again while the API server cannot be reached (or until ``stop``):
    a controller started before its API server waits for it, as `Manager.run` does."""
    delay = 1.0
    while not stop.is_set():
        try:
            await start()
            return
        except StoreError as exc:
            if not exc.retryable:
                raise
            log.warning("cannot %s yet (%s); retrying in %.0fs", what, exc, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
        delay = min(delay * 2, 30.0)


async def _estimate_when_ready(
    estimates: estimating.StartEstimates, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    """Estimated start times, from the first synced state on (only the lease holder runs this)."""
    await ready.wait()
    await estimates.run(stop)


def _build_manager(
    writer: kubernetes.KubernetesStore | leader.FencedStore,
    elector: leader.LeaderElector | None,
    config: EngineConfig,
    ops: Operations,
    jobs: Jobs,
    resync: float,
) -> tuple[Manager, metrics.Metrics]:
    """The manager over ``writer`` and the metrics registry that observes its passes."""
    registry = metrics.Metrics(
        state=lambda: manager.admission.state if manager.passes else None,
        role=lambda: "standalone" if elector is None else ("leader" if elector.leading else "follower"),
        lease_name=ops.lease_name if elector is not None else "",
        write_backlog=lambda: manager.admission.write_backlog(),
        unseen_preemption=lambda key: key in manager.admission.unseen_preemptions,
    )
    manager = Manager(
        writer,
        config=config,
        registry=jobs.registry,
        settings=jobs.settings,
        resync_seconds=resync,
        min_pass_seconds=ops.min_pass_seconds,
        max_admissions_ahead=ops.max_admissions_ahead,
        on_pass=registry.observe_pass,
        events=EventRecorder(writer),
        multikueue=multikueue.for_manager(jobs.multikueue),
        policy_history_namespace=ops.lease_namespace if ops.policy_history else "",
        retention_policy=jobs.retention_policy,
    )
    return manager, registry


async def _serve_health(
    ops: Operations,
    registry: metrics.Metrics,
    manager: Manager,
    store: kubernetes.KubernetesStore,
    ready: asyncio.Event,
    elector: leader.LeaderElector | None,
    estimates: estimating.StartEstimates,
) -> health.HealthServer | None:
    """/metrics, the probes and the visibility API on ``ops.metrics_port`` (None: not served).

    The probes' ports listen before the API server answers: /healthz 200 and /readyz 503
    meanwhile, so a pod that starts during an API outage is not restarted by its liveness probe.
    """
    if not ops.metrics_port:
        return None
    app = health.create_app(
        registry,
        state=lambda: manager.admission.state if manager.passes else None,
        ready=lambda: ready.is_set() or (elector is not None and elector.standing_by),
        authorizer=health.kube_authorizer(store.request) if ops.authorize_visibility else None,
        workloads=lambda: [m for k, m in manager.admission.cache.items() if k.kind == "Workload"],
        estimated=estimates.estimated_start,
        cached=manager.admission.cache.get,
    )
    side = health.HealthServer(app, ops.metrics_host, ops.metrics_port)
    await side.start()
    return side


async def _serve_local_webhooks(
    address: tuple[str, int],
    store: kubernetes.KubernetesStore,
    manager: Manager,
    ops: Operations,
    jobs: Jobs,
    elector: leader.LeaderElector | None,
    source: visibility_api.Source,
    on_review: Callable[[Manifest], None] | None,
    stop: asyncio.Event,
) -> tuple[webhooks.WebhookServer | None, asyncio.Task[None] | None]:
    """The webhooks served outside the cluster, and the task that keeps them registered while
    this replica should be (None, None when stopped before they could start)."""
    host, port = address
    queues = cached_queues(manager, store)
    server: webhooks.WebhookServer | None = None

    async def start_local() -> None:
        nonlocal server
        server = await serve_local_webhooks(
            store,
            queues,
            host,
            port,
            ops.lease_namespace,
            jobs=jobs,
            visibility=source,
            on_review=on_review,
            objects=cached_objects(manager, store),
        )

    await _until_reachable(start_local, stop, "start the local webhooks")
    if server is None:
        return None, None
    registration = _local_registration(store, server, ops.lease_namespace, jobs, elector)
    # The first check registers this replica unless a live one is registered already.
    await _until_reachable(registration.first_check, stop, "register the local webhooks")
    return server, asyncio.create_task(registration.run(stop))


async def _lead(
    manager: Manager,
    estimates: estimating.StartEstimates,
    store: kubernetes.KubernetesStore,
    stop: asyncio.Event,
    ready: asyncio.Event,
) -> None:
    """What the lease holder (or the only replica) runs: the manager, and the start estimates."""
    task = asyncio.create_task(manager.run(stop, ready))
    waiter = asyncio.create_task(ready.wait())
    estimating_task = asyncio.create_task(_estimate_when_ready(estimates, ready, stop))
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if ready.is_set():
        log.info("pykueue controller is running against %s", store.config.server)
    try:
        await task
    finally:
        waiter.cancel()
        estimating_task.cancel()


async def _run_controller(
    store: kubernetes.KubernetesStore,
    resync: float,
    webhook_config: webhooks.WebhookConfig | None,
    config: EngineConfig,
    ops: Operations | None = None,
    jobs: Jobs | None = None,
    local_webhooks: tuple[str, int] | None = None,
) -> bool:
    """Run until SIGTERM/SIGINT (True) or until the lease is lost (False).

    ``local_webhooks`` (host, port): serve the webhooks outside the cluster (`serve_local_webhooks`),
    registered while this replica should be (`pykueue.kube.local_registration`).
    """
    ops = ops or Operations()
    jobs = jobs or jobs_of(configuration.default())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready = asyncio.Event()
    elector = leader.LeaderElector(store, ops.lease_namespace, ops.lease_name) if ops.leader_elect else None
    # Only the lease holder writes: every write of the manager goes through the fence.
    writer = leader.FencedStore(store, elector.may_write) if elector is not None else store
    manager, registry = _build_manager(writer, elector, config, ops, jobs, resync)
    estimates = estimating.StartEstimates(manager.admission, job_by_uid=manager.jobs.job_by_uid)
    annotations = estimate_annotations.AnnotationWriter(writer, manager.admission.cache.get)
    estimates.on_refresh = lambda found: annotations.write(found, intake.micros(manager.clock()))
    # The aggregated visibility API answers from the engine once a pass ran (as /metrics does).
    source = visibility_api.Source(
        state=lambda: manager.admission.state if manager.passes else None,
        authorizer=visibility_api.subject_access_reviewer(store.request),
        estimated=estimates.estimated_start,
    )
    # The policy history takes the user of a change from the webhook's request when it saw it.
    on_review = manager.policy.note_request if manager.policy is not None else None
    side = await _serve_health(ops, registry, manager, store, ready, elector, estimates)
    server: webhooks.WebhookServer | None = None
    registering: asyncio.Task[None] | None = None
    if webhook_config is not None:
        # Webhooks first (on every replica): Jobs created while the controller lists are already suspended.
        server = webhooks.WebhookServer(
            webhook_config,
            store,
            cached_queues(manager, store),
            visibility=source,
            objects=cached_objects(manager, store),
            on_review=on_review,
        )
        await server.listen()
        await _until_reachable(server.connect, stop, "get the webhook certificate")
        if stop.is_set():
            await server.stop()
            if side is not None:
                await side.stop()
            await store.close()
            return True
    elif local_webhooks is not None:
        server, registering = await _serve_local_webhooks(
            local_webhooks, store, manager, ops, jobs, elector, source, on_review, stop
        )

    async def lead() -> None:
        await _lead(manager, estimates, store, stop, ready)

    try:
        if elector is None:
            await lead()
            return True
        log.info("waiting for lease %s/%s as %s", ops.lease_namespace, ops.lease_name, elector.identity)
        return await elector.run(lead, stop)
    finally:
        if registering is not None:
            registering.cancel()
        if side is not None:
            await side.stop()
        if server is not None:
            await server.stop()
        await store.close()


def load_configuration(config_file: Path | None) -> tuple[configuration.Configuration, Jobs]:
    """The --config file's Configuration (else the default) and its job side; exit 2 when it is bad."""
    try:
        cfg = configuration.load(config_file) if config_file else configuration.default()
        return cfg, jobs_of(cfg)
    except (PykueueError, jobframework.UnknownFramework) as exc:
        typer.echo(
            f"error: {config_file}: {exc}" if isinstance(exc, ValueError) else f"error: {exc}", err=True
        )
        raise typer.Exit(2) from None


# The options of `pykueue controller`, one constant each (as `standalone_commands` names its own).
KUBECONFIG_OPTION = typer.Option(
    None,
    "--kubeconfig",
    help="kubeconfig file; without it $KUBECONFIG, else the pod's service account, else ~/.kube/config.",
)
CONTEXT_OPTION = typer.Option(None, "--context", help="kubeconfig context (default: current).")
RESYNC_OPTION = typer.Option(1.0, "--resync-seconds", help="Seconds between passes without events.")
MIN_PASS_OPTION = typer.Option(
    0.1, "--min-pass-seconds", help="Least seconds between passes; events meanwhile are batched."
)
MAX_AHEAD_OPTION = typer.Option(
    64,
    "--max-admissions-ahead",
    help="Admissions and evictions decided ahead of their status writes, at most: those queued or waiting for the rate limit (0: no limit).",
)
LOG_LEVEL_OPTION = typer.Option("INFO", "--log-level", help="DEBUG, INFO, WARNING or ERROR.")
SERVE_WEBHOOKS_OPTION = typer.Option(
    False, "--webhooks", help="Also serve the webhooks (Job suspension, validation, conversion)."
)
LOCAL_WEBHOOKS_OPTION = typer.Option(
    False,
    "--local-webhooks",
    help="Outside the cluster: serve the webhooks on --webhook-host and register them (and the CRDs' "
    "v1beta1 conversion) by URL, with a self-signed certificate.",
)
WEBHOOK_HOST_OPTION = typer.Option(
    "127.0.0.1",
    "--webhook-host",
    help="With --local-webhooks: the address the API server reaches this process at.",
)
WEBHOOK_PORT_OPTION = typer.Option(9443, "--webhook-port", help="HTTPS port of the webhook server.")
CONFIG_FILE_OPTION = typer.Option(
    None,
    "--config",
    help="Upstream Kueue's Configuration file (integrations, waitForPodsReady, fairSharing, ...).",
)
FAIR_SHARING_OPTION = typer.Option(
    False,
    "--fair-sharing",
    help="Fair sharing between ClusterQueues (upstream's fairSharing.enable; also in --config).",
)
NOMINAL_FIRST_OPTION = typer.Option(
    True,
    "--nominal-first/--upstream-cycle",
    help="Within a pass, a queue's heads take back its freed nominal quota before others borrow it "
    "(docs/semantics.md); --upstream-cycle runs upstream's cycle unchanged.",
)
POLICY_HISTORY_OPTION = typer.Option(
    True,
    "--policy-history/--no-policy-history",
    help="Record every change of flavors, queues, cohorts and priority classes as ConfigMaps "
    "in the lease namespace (pykueue policy history).",
)
LEADER_ELECT_OPTION = typer.Option(
    False, "--leader-elect", help="Write only while holding the Lease (run several replicas)."
)
LEASE_NAMESPACE_OPTION = typer.Option(
    "", "--lease-namespace", help="Namespace of the Lease (default: $POD_NAMESPACE or kueue-system)."
)
METRICS_PORT_OPTION = typer.Option(
    0,
    "--metrics-port",
    "--health-port",
    help="HTTP port of /metrics, /healthz, /readyz and the visibility API (0: none; the Deployment uses 8080).",
)
METRICS_HOST_OPTION = typer.Option("0.0.0.0", "--metrics-host", help="Address of that port.")
QPS_OPTION = typer.Option(
    50.0, "--qps", help="API requests per second per resource kind, sustained (0: unlimited)."
)
BURST_OPTION = typer.Option(
    100, "--burst", help="API requests per resource kind allowed in a burst above --qps."
)


def controller(
    kubeconfig: Path | None = KUBECONFIG_OPTION,
    context: str | None = CONTEXT_OPTION,
    resync: float = RESYNC_OPTION,
    min_pass: float = MIN_PASS_OPTION,
    max_ahead: int = MAX_AHEAD_OPTION,
    log_level: str = LOG_LEVEL_OPTION,
    serve_webhooks: bool = SERVE_WEBHOOKS_OPTION,
    local_webhooks: bool = LOCAL_WEBHOOKS_OPTION,
    webhook_host: str = WEBHOOK_HOST_OPTION,
    webhook_port: int = WEBHOOK_PORT_OPTION,
    config_file: Path | None = CONFIG_FILE_OPTION,
    fair_sharing: bool = FAIR_SHARING_OPTION,
    nominal_first: bool = NOMINAL_FIRST_OPTION,
    policy_history: bool = POLICY_HISTORY_OPTION,
    leader_elect: bool = LEADER_ELECT_OPTION,
    lease_namespace: str = LEASE_NAMESPACE_OPTION,
    metrics_port: int = METRICS_PORT_OPTION,
    metrics_host: str = METRICS_HOST_OPTION,
    qps: float = QPS_OPTION,
    burst: int = BURST_OPTION,
) -> None:
    """Run pykueue as a Kubernetes controller: admit queued jobs and Workloads, write queue status."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg, jobs = load_configuration(config_file)
    webhook_config = (
        webhooks.WebhookConfig.from_env(
            os.environ,
            port=webhook_port,
            frameworks=jobs.frameworks,
            manage_jobs_without_queue_name=cfg.manage_jobs_without_queue_name,
            feature_gates=jobs.feature_gates,
        )
        if serve_webhooks
        else None
    )
    try:
        gc_tuning.tune_for_service()
        store = connect(kubeconfig, context, qps, burst)
        # Lists that start watches come from the API server's watch cache, as informers' do.
        store.list_from_watch_cache = True
        config = engine_config(config_file, fair_sharing, nominal_first, cfg)
        ops = Operations(
            leader_elect=leader_elect,
            lease_namespace=lease_namespace or os.environ.get("POD_NAMESPACE") or "kueue-system",
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            min_pass_seconds=min_pass,
            max_admissions_ahead=max_ahead,
            policy_history=policy_history,
        )
        if local_webhooks and serve_webhooks:
            raise PykueueError(
                "--webhooks (in a pod, behind the Service) and --local-webhooks exclude each other"
            )
        local = (webhook_host, webhook_port) if local_webhooks else None
        stopped = asyncio.run(_run_controller(store, resync, webhook_config, config, ops, jobs, local))
    except PykueueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if not stopped:
        # As controller-runtime: a replica that lost its lease exits, and is restarted as a standby.
        typer.echo("error: leader election lost", err=True)
        raise typer.Exit(1)


# Feature gates whose Kubernetes-mode default differs from upstream's (docs/kubernetes.md):
# every pending Workload gets a QuotaReserved condition at once, not only those a scheduling
# cycle tried, so that `kubectl get workloads` explains each one.
KUBERNETES_GATES: dict[str, bool] = {"UnadmittedWorkloadsExplicitStatus": True}


def engine_config(
    path: Path | None, fair_sharing: bool, nominal_first: bool, cfg: configuration.Configuration | None = None
) -> EngineConfig:
    """The engine's configuration: the --config file's (``cfg`` when it is read already), the
    flags on top.

    Evictions are asynchronous in Kubernetes mode: a victim keeps its quota until its
    job's pods are gone, as upstream's job reconciler releases it (docs/semantics.md).
    """
    options: dict[str, Any] = {"nominal_first": nominal_first, "async_evictions": True}
    if path is None:
        config = EngineConfig(fair_sharing=FairSharing(enable=fair_sharing), **options)
        return dataclasses.replace(config, feature_gates=dict(KUBERNETES_GATES))
    loaded = (
        kueue_configuration.of(cfg, **options)
        if cfg is not None
        else kueue_configuration.load(path, **options)
    )
    if loaded.unused:
        log.warning("%s: not used by pykueue (yet): %s", path, ", ".join(loaded.unused))
    config = loaded.engine
    # The file's own featureGates win over our Kubernetes-mode defaults.
    config = dataclasses.replace(config, feature_gates={**KUBERNETES_GATES, **config.feature_gates})
    if fair_sharing and not config.fair_sharing.enable:
        config = dataclasses.replace(
            config, fair_sharing=dataclasses.replace(config.fair_sharing, enable=True)
        )
    return config


# ---------------------------------------------------------------------- install


def default_manifests(
    crds_only: bool = True, namespace: str = "kueue-system", image: str = ""
) -> list[dict[str, Any]]:
    """What `install` applies without ``-f``: `pykueue manifests`' output, or only the CRDs."""
    if crds_only:
        # No conversion webhook yet: v1beta1 is refused rather than silently stripped of its
        # renamed fields; `pykueue controller --local-webhooks` serves it (with conversion).
        # The user-facing roles come along: without them a namespace editor sees no Workload.
        return [*crd.crds(v1beta1_served=False), *deploy.user_roles()]
    config = deploy.DeployConfig(namespace=namespace, image=image or deploy.DEFAULT_IMAGE)
    return deploy.render(config)


def read_manifests(paths: list[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc.get("kind", "").endswith("List") and "items" in doc:
                docs.extend(doc["items"])
            else:
                docs.append(doc)
    return docs


async def apply_all(
    store: kubernetes.KubernetesStore,
    docs: list[dict[str, Any]],
    timeout: float = 60.0,
    field_manager: str = "",
) -> list[str]:
    """Apply CRDs, wait until they are Established, then apply the rest; the names applied.

    As ``field_manager``, by default `INSTALL_FIELD_MANAGER` (kubectl's): whoever installs
    (`pykueue install`, the local webhooks, `kubectl apply --server-side`) owns the fields as
    one manager, so none of them conflicts with another.
    """
    field_manager = field_manager or INSTALL_FIELD_MANAGER
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    rest = [d for d in docs if d.get("kind") != "CustomResourceDefinition"]
    applied: list[str] = []
    for doc in crds:
        await store.apply(doc, field_manager=field_manager)
        applied.append(f"CustomResourceDefinition/{doc['metadata']['name']}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for doc in crds:
        name = doc["metadata"]["name"]
        while True:
            current = await store.get("CustomResourceDefinition", "", name)
            conditions = (current.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            if loop.time() > deadline:
                raise PykueueError(f"CustomResourceDefinition {name} is not Established after {timeout:.0f}s")
            await asyncio.sleep(0.2)
    for doc in rest:
        await store.apply(doc, field_manager=field_manager)
        meta = doc.get("metadata") or {}
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        applied.append(f"{doc.get('kind')}/{where}{meta.get('name')}")
    return applied


def install(
    kubeconfig: Path | None = typer.Option(
        None,
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config).",
    ),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context (default: current)."),
    filenames: list[Path] = typer.Option(
        [],
        "-f",
        "--filename",
        help="Manifest files to apply instead of the built-in ones.",
    ),
    crds_only: bool = typer.Option(
        False,
        "--crds-only",
        help="Only the CRDs and the user-facing roles (for a controller run outside the cluster).",
    ),
    namespace: str = typer.Option("kueue-system", "--namespace", help="Namespace of the controller."),
    image: str = typer.Option("", "--image", help="Controller image (default: the release image)."),
    field_manager: str = typer.Option(
        INSTALL_FIELD_MANAGER,
        "--field-manager",
        help="Server-side apply field manager (default: kubectl's, so `kubectl apply --server-side` "
        "of the same objects later does not conflict).",
    ),
) -> None:
    """Apply pykueue's manifests to a cluster (server-side apply), CRDs first."""
    docs = read_manifests(filenames) if filenames else default_manifests(crds_only, namespace, image)

    async def go() -> list[str]:
        store = connect(kubeconfig, context)
        try:
            return await apply_all(store, docs, field_manager=field_manager)
        finally:
            await store.close()

    try:
        applied = asyncio.run(go())
    except PykueueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for name in applied:
        typer.echo(f"{name} applied")


def register(app: typer.Typer) -> None:
    """Add `controller` and `install` to the app."""
    app.command("controller")(controller)
    app.command("install")(install)
