"""`pykueue up`: one process with the store, the controllers, the executor and the HTTP API.

Start-up order matters for crash safety:

1. make every file it writes private (umask 077; the data folder 0700, its
   files 0600), then take the data folder's lock (a second server on the same
   store would run every job twice), held by the OS until this process dies,
   even by kill -9;
2. open the store, decide how pods are fenced in (`isolation`: users,
   cgroups, work folders; said on the console) and kill whatever an earlier
   server on it left running (`LocalExecutor.kill_leftovers`), before anything
   may start;
3. make sure an admin token exists (only its hash is stored; the token itself
   goes to the 0600 client config the CLI reads);
4. apply the config's manifests (or, on an empty store without any, a
   ``main`` ClusterQueue sized to this machine) as the server's own user;
5. run the admission controller, the job reconciler, the executor and the API
   (on TCP with tokens, and on a Unix socket where the kernel names the
   caller) on one event loop; freeze the loaded state out of the garbage
   collector.

Stopping (Ctrl-C, SIGTERM) stops the API and the controllers and sends the
running pods SIGTERM (then SIGKILL after their grace, at most 10 s): the next
``up`` starts their jobs again with ``PYKUEUE_PREEMPTED=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import json
import logging
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import uvicorn
import yaml

from pykueue import gc_tuning, paths
from pykueue.api import access
from pykueue.api import configuration as api_configuration
from pykueue.engine import configuration
from pykueue.engine.config import EngineConfig
from pykueue.errors import InputError, NotFound, PykueueError
from pykueue.multikueue import controller as multikueue
from pykueue.multikueue.standalone_workers import StandaloneMultiKueue
from pykueue.reconcilers import estimating, integrations, retention
from pykueue.standalone import demo
from pykueue.standalone.admission import StandaloneAdmission
from pykueue.standalone.http import applying, auth, owners
from pykueue.standalone.http import limits as limits_config
from pykueue.standalone.http.app import ServerContext, create_app
from pykueue.standalone.http.peer import PeerCredentialsProtocol, bind_unix_socket
from pykueue.standalone.manager import StandaloneManager
from pykueue.standalone.node import isolation
from pykueue.standalone.node.executor import Backoff, LocalExecutor, log_folder
from pykueue.standalone.node.machine import GPU_RESOURCE, Node, discover
from pykueue.store.base import Key, Manifest
from pykueue.store.sqlite import SQLiteStore
from pykueue.views import dashboard_data

log = logging.getLogger(__name__)
DEFAULT_PORT = 8642
SHUTDOWN_GRACE_SECONDS = 10.0


@dataclass
class Options:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    config: Path | None = None
    demo: bool = False
    client_config: Path | None = None
    quiet: bool = False
    socket: Path | None = None  # default: paths.default_socket
    work_dir: Path | None = None  # default: isolation.default_work_root
    throwaway: bool = False  # the data and work folders are this run's (a demo's): removed at the end


# The standalone config's own sections; the rest are Kueue Configuration sections, read by
# `pykueue.api.configuration` as in Kubernetes mode (the engine's, MultiKueue, retention).
OWN_SECTIONS = frozenset({"node", "manifests", "demo", "isolation", "executor", limits_config.SECTION})
KUEUE_SECTIONS = api_configuration.ENGINE_SECTIONS | {"multiKueue", "objectRetentionPolicies"}


@dataclass
class Config:
    """The ``--config`` file: node GPUs, manifests applied at start, demo phases, isolation."""

    gpus: list[dict[str, Any]] = field(default_factory=list)
    gpu_domains: list[Any] = field(default_factory=list)  # node.gpuDomains: lists of device ids
    manifests: list[Path] = field(default_factory=list)
    demo: list[tuple[float, Path]] = field(default_factory=list)
    user_prefix: str = owners.DEFAULT_USER_PREFIX
    create_users: bool = True
    cgroups: bool = True
    backoff: Backoff = field(default_factory=Backoff)
    engine: EngineConfig = field(default_factory=EngineConfig)
    # This server as a MultiKueue manager of other standalone servers (docs/multikueue.md).
    multikueue: multikueue.Settings = field(default_factory=multikueue.Settings)
    # objectRetentionPolicies.workloads, as in Kubernetes mode (`pykueue.reconcilers.retention`).
    retention: retention.Policy = field(default_factory=retention.Policy)
    # What one tenant or one job may take (`pykueue.standalone.http.limits`).
    limits: limits_config.Limits = field(default_factory=limits_config.Limits)

    @staticmethod
    def load(path: Path | None) -> Config:
        if path is None:
            return Config()
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read the config: {exc}") from None
        if not isinstance(raw, dict):
            raise InputError(f"{path}: the config must be a mapping")
        unknown = set(raw) - OWN_SECTIONS - KUEUE_SECTIONS
        if unknown:
            raise InputError(f"{path}: unknown config keys {', '.join(sorted(map(str, unknown)))}")
        # Kueue's own sections, read as every Configuration is (one typed object).
        kueue = api_configuration.parse_sections(
            {k: v for k, v in raw.items() if k in KUEUE_SECTIONS}, str(path), accept=KUEUE_SECTIONS
        )
        base = path.parent
        node = raw.get("node") or {}
        if not isinstance(node, dict) or set(node) - {"gpus", "gpuDomains"}:
            extra = sorted(map(str, node)) if isinstance(node, dict) else []
            raise InputError(f"{path}: node takes gpus and gpuDomains (got {', '.join(extra) or node!r})")
        fences = _section(path, raw, "isolation", {"userPrefix": str, "createUsers": bool, "cgroups": bool})
        pace = _section(
            path, raw, "executor", {"podFailureBackoffSeconds": float, "podFailureBackoffMaxSeconds": float}
        )
        default_backoff = Backoff()
        return Config(
            gpus=[dict(g) for g in node.get("gpus") or []],
            gpu_domains=list(node.get("gpuDomains") or []),
            manifests=[base / str(p) for p in raw.get("manifests") or []],
            demo=[(float(d.get("after", 0)), base / str(d["file"])) for d in raw.get("demo") or []],
            user_prefix=str(fences.get("userPrefix", owners.DEFAULT_USER_PREFIX)),
            create_users=bool(fences.get("createUsers", True)),
            cgroups=bool(fences.get("cgroups", True)),
            backoff=Backoff(
                float(pace.get("podFailureBackoffSeconds", default_backoff.base)),
                float(pace.get("podFailureBackoffMaxSeconds", default_backoff.most)),
            ),
            engine=configuration.engine_config(kueue),
            multikueue=multikueue.settings_of(kueue.multi_kueue),
            retention=retention.policy_of(kueue.object_retention_policies),
            limits=limits_config.load(path, raw.get(limits_config.SECTION)),
        )


def _section(path: Path, raw: dict[str, Any], name: str, fields: dict[str, type]) -> dict[str, Any]:
    """One mapping of the config, every key known and of its type."""
    section = raw.get(name) or {}
    if not isinstance(section, dict):
        raise InputError(f"{path}: {name} must be a mapping")
    for key, value in section.items():
        wanted = fields.get(str(key))
        if wanted is None:
            raise InputError(f"{path}: {name}.{key} is not a known key ({', '.join(fields)})")
        ok = isinstance(value, wanted) or (wanted is float and isinstance(value, int))
        if not ok or (wanted is not bool and isinstance(value, bool)):
            raise InputError(f"{path}: {name}.{key} must be a {wanted.__name__}, not {value!r}")
    return section


class Console:
    """Where decisions and executor events are printed (and kept for /api/v1/events)."""

    def __init__(self, ctx_events: list[dict[str, Any]], out: TextIO | None) -> None:
        self.events = ctx_events
        self.out = out
        self.started = time.monotonic()

    def record(self, source: str, message: str, namespace: str = "") -> None:
        """Print and keep one event; ``namespace`` says which tenants may read it ("" = everyone)."""
        elapsed = time.monotonic() - self.started
        event = {"seconds": round(elapsed, 3), "source": source, "message": message}
        if namespace:
            event["namespace"] = namespace
        self.events.append(event)
        if self.out is not None:
            print(f"[{elapsed:7.2f}s] {source:<9} {message}", file=self.out, flush=True)


def secure_data_dir(data_dir: Path) -> None:
    """The data folder and everything in it readable by the server's user only (0700 / 0600)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for folder, dirs, files in os.walk(data_dir):
        os.chmod(folder, 0o700)
        for name in files:
            target = os.path.join(folder, name)
            if not os.path.islink(target) and not stat.S_ISSOCK(os.lstat(target).st_mode):
                os.chmod(target, 0o600)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]


@contextlib.contextmanager
def data_lock(data_dir: Path) -> Iterator[None]:
    secure_data_dir(data_dir)
    path = data_dir / "pykueue.lock"
    handle = open(path, "a+")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        owner = handle.read().strip() or "another process"
        handle.close()
        raise InputError(
            f"{data_dir} is in use by pykueue up (pid {owner}); stop it or pass another --data"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    try:
        yield
    finally:
        handle.close()


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def write_client_config(path: Path, server: str, token: str, socket_path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"server": server, "token": token, "socket": str(socket_path)}, out)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


async def ensure_admin(store: SQLiteStore, known: list[Path]) -> str:
    """The admin token: the one in a client config if it still matches, else a new one."""
    try:
        current = await store.get(access.IDENTITY_KIND, "", "admin")
    except NotFound:
        current = None
    if current is not None:
        for path in known:
            with contextlib.suppress(OSError, ValueError, KeyError):
                token = str(json.loads(path.read_text())["token"])
                if auth.token_hash(token) == current["spec"].get("tokenSha256"):
                    return token
    token = auth.new_token()
    manifest = auth.identity_manifest(access.Identity("admin", access.ADMIN), token)
    if current is None:
        await store.create(manifest)
    else:
        manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await store.update(manifest)
    return token


def default_queues(node: Node) -> str:
    """A ``main`` ClusterQueue and LocalQueue (namespace default) sized to this machine."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    ]
    groups: list[dict[str, Any]] = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": "default",
                    "resources": [
                        {"name": "cpu", "nominalQuota": str(node.cpus)},
                        {"name": "memory", "nominalQuota": f"{node.memory // 2**20}Mi"},
                    ],
                }
            ],
        }
    ]
    if node.gpus:
        for flavor in node.gpus:
            docs.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "ResourceFlavor",
                    "metadata": {"name": flavor},
                }
            )
        groups.append(
            {
                "coveredResources": [GPU_RESOURCE],
                "flavors": [
                    {"name": flavor, "resources": [{"name": GPU_RESOURCE, "nominalQuota": str(len(devices))}]}
                    for flavor, devices in node.gpus.items()
                ],
            }
        )
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "main"},
            "spec": {"namespaceSelector": {}, "resourceGroups": groups},
        }
    )
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": "default"},
            "spec": {"clusterQueue": "main"},
        }
    )
    return yaml.safe_dump_all(docs)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the runtime stops everything in order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _apply_files(
    store: SQLiteStore,
    admin: access.Identity,
    paths: list[Path],
    console: Console,
    owning: owners.Owners,
    limits: limits_config.Limits,
) -> None:
    try:
        files = [(str(p), p.read_text(encoding="utf-8")) for p in paths]
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read a manifest of the config: {exc}") from None
    author = f"{access.author(admin)}, from the server's config"
    result = await applying.apply(store, admin, files, owning, author=author, limits=limits)
    for action in result.actions:
        where = f"{action['namespace']}/" if action["namespace"] else ""
        console.record(
            "apply", f"{action['kind']} {where}{action['name']} {action['action']}", action["namespace"]
        )


async def _demo(
    store: SQLiteStore,
    admin: access.Identity,
    phases: list[tuple[float, Path]],
    console: Console,
    owning: owners.Owners,
    limits: limits_config.Limits,
) -> None:
    started = time.monotonic()
    for after, path in phases:
        await asyncio.sleep(max(0.0, started + after - time.monotonic()))
        console.record("demo", f"applying {path.name}")
        try:
            await _apply_files(store, admin, [path], console, owning, limits)
        except PykueueError as exc:
            console.record("demo", f"refused: {exc}")
    console.record(
        "demo",
        "all demo jobs submitted; in another terminal, with PYKUEUE_SOCKET set as printed above, try:"
        " pykueue get clusterqueues | pykueue get jobs"
        " | pykueue describe workload eval -n research | pykueue logs train-big -n research",
    )


async def _pump_decisions(admission: StandaloneAdmission, console: Console, stop: asyncio.Event) -> None:
    seen = 0
    while not stop.is_set():
        events = admission.decisions
        seen = min(seen, len(events))  # a resync starts a new list
        for event in events[seen:]:
            namespace = event.workload.split("/", 1)[0] if "/" in event.workload else ""
            console.record("engine", f"{event.type} {event.workload}: {event.message}", namespace)
        seen = len(events)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.2)


async def _sample_history(ctx: ServerContext, stop: asyncio.Event) -> None:
    """The dashboard's usage charts: one sample of the engine every HISTORY_INTERVAL seconds."""
    while not stop.is_set():
        ctx.history.sample(ctx.admission.state, time.time())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=dashboard_data.HISTORY_INTERVAL)


@dataclass
class _LocalNode:
    """Where and how this server runs jobs: the machine, its fences, the executor."""

    node: Node
    fences: isolation.Isolation
    work_root: Path
    executor: LocalExecutor
    leftovers: str  # what was killed of an earlier server's processes ("" when nothing)


async def _main(options: Options, config: Config) -> None:
    """Start-up in the order the module's docstring gives, serve until stopped, then stop in order."""
    _watch_children_by_pidfd()
    data_dir = options.data_dir
    store = SQLiteStore(data_dir / "pykueue.db")
    events: list[dict[str, Any]] = []
    console = Console(events, None if options.quiet else sys.stdout)
    local = _local_node(options, config, store, console)
    client_paths = [p for p in (options.client_config, data_dir / "client.json") if p is not None]
    token = await ensure_admin(store, client_paths)
    owning = _owners(config, local.fences)
    itself = auth.local_admin(os.getuid())  # the config is the server owner's word
    await _first_policies(store, itself, config, console, owning, local.node)
    manager = _manager(store, config, console, data_dir)
    port = options.port or free_port(options.host)
    url = f"http://{options.host}:{port}"
    ctx = _context(config, store, data_dir, local, manager, owning, events)
    socket_path = options.socket or paths.default_socket(data_dir)
    sockets = _listen(options.host, port, socket_path)
    server = _Server(
        uvicorn.Config(create_app(ctx), log_level="warning", lifespan="off", http=PeerCredentialsProtocol)
    )
    stop = asyncio.Event()

    def request_stop() -> None:
        server.should_exit = True
        stop.set()

    _handle_signals(request_stop)
    tasks = [
        asyncio.create_task(_supervised("manager", lambda: manager.run(stop), stop, console)),
        asyncio.create_task(_supervised("executor", lambda: local.executor.run(stop), stop, console)),
    ]
    helpers = _start_helpers(options, config, ctx, itself, console, stop)
    for path in client_paths:
        write_client_config(path, url, token, socket_path)
    _announce(options, url, token, socket_path, client_paths, local)
    serving = asyncio.create_task(server.serve(sockets=sockets), name="api")
    await _freeze_when_loaded(manager.admission)
    done, _ = await asyncio.wait([serving, *tasks], return_when=asyncio.FIRST_COMPLETED)
    failed = [t for t in done if not t.cancelled() and t.exception() is not None]
    request_stop()
    await asyncio.gather(serving, *tasks, *helpers, return_exceptions=True)
    await _clean_up(local, socket_path, store)
    if failed:
        error = failed[0].exception()
        assert error is not None
        raise error


def _watch_children_by_pidfd() -> None:
    """No thread per child process, unlike asyncio's default watcher (where the kernel has pidfds)."""
    with contextlib.suppress(AttributeError, NotImplementedError, OSError):
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)


def _local_node(options: Options, config: Config, store: SQLiteStore, console: Console) -> _LocalNode:
    """The machine, its fences and the executor, with an earlier server's processes killed first."""
    data_dir = options.data_dir
    node = discover(config.gpus, config.gpu_domains)
    work_root = options.work_dir or isolation.default_work_root(data_dir, store.path)
    fences = isolation.Isolation.detect(store.path, work_root, use_cgroups=config.cgroups)
    try:
        fences.prepare()
    except OSError as exc:
        raise PykueueError(f"cannot prepare the work folder {work_root}: {exc}") from None
    executor = LocalExecutor(
        store,
        node,
        data_dir,
        marker=str(store.path.resolve()),
        isolation=fences,
        record=lambda message, namespace: console.record("executor", message, namespace),
        backoff=config.backoff,
    )
    killed, left = executor.kill_leftovers()
    if left:
        raise PykueueError(f"{left} process(es) of an earlier server would not die; not starting")
    leftovers = _leftovers_said(killed)
    if leftovers:
        console.record("executor", leftovers)
    return _LocalNode(node, fences, work_root, executor, leftovers)


def _owners(config: Config, fences: isolation.Isolation) -> owners.Owners:
    """Whose Unix users jobs run as, as the fences and the config allow."""
    return owners.Owners(
        switch_users=fences.switch_users,
        server=fences.server,
        user_prefix=config.user_prefix,
        create_users=config.create_users,
    )


async def _first_policies(
    store: SQLiteStore,
    itself: access.Identity,
    config: Config,
    console: Console,
    owning: owners.Owners,
    node: Node,
) -> None:
    """The config's manifests; or, on a store without a ClusterQueue, queues sized to this machine."""
    if config.manifests:
        await _apply_files(store, itself, config.manifests, console, owning, config.limits)
    elif not (await store.list("ClusterQueue"))[0]:
        await applying.apply(
            store,
            itself,
            [("default-queues", default_queues(node))],
            owning,
            author=f"{access.author(itself)}, the server's default queues",
        )
        console.record("apply", "created ClusterQueue main and LocalQueue default/main sized to this machine")


def _manager(store: SQLiteStore, config: Config, console: Console, data_dir: Path) -> StandaloneManager:
    """The controllers, their log lines on the console, MultiKueue workers' logs kept in ``data_dir``."""
    # The kinds the local executor runs: batch/v1 Jobs and JobSets.
    registry = integrations.registry(integrations.STANDALONE_FRAMEWORKS)
    manager = StandaloneManager(
        store,
        config=config.engine,
        registry=registry,
        resync_seconds=0.5,
        multikueue=multikueue.for_manager(config.multikueue, StandaloneMultiKueue),
        retention_policy=config.retention,
    )
    _forward_logs("pykueue.reconcilers.job_reconciler", "jobs", console)
    # Dispatches, elections, lost workers and refused copies, beside the decisions.
    _forward_logs("pykueue.multikueue.controller", "multikueue", console)
    _forward_logs("pykueue.multikueue.clusters", "multikueue", console)
    _forward_logs("pykueue.multikueue.standalone_workers", "multikueue", console)
    if isinstance(manager.multikueue_checks, StandaloneMultiKueue):
        manager.multikueue_checks.keep_logs = lambda job, text: keep_worker_logs(data_dir, job, text)
    return manager


def _context(
    config: Config,
    store: SQLiteStore,
    data_dir: Path,
    local: _LocalNode,
    manager: StandaloneManager,
    owning: owners.Owners,
    events: list[dict[str, Any]],
) -> ServerContext:
    """What the API's routes are handed: the parts above, who is calling, the start estimates."""
    return ServerContext(
        store=store,
        admission=manager.admission,
        manager=manager,
        executor=local.executor,
        authenticator=auth.Authenticator(store, server_uid=os.getuid()),
        node=local.node,
        data_dir=data_dir,
        owners=owning,
        events=events,
        estimates=estimating.StartEstimates(manager.admission, job_by_uid=manager.jobs.job_by_uid),
        limits=config.limits,
    )


def _listen(host: str, port: int, socket_path: Path) -> list[socket.socket]:
    try:
        return [_tcp_socket(host, port), bind_unix_socket(socket_path)]
    except OSError as exc:
        raise PykueueError(f"cannot listen: {exc}") from None


def _handle_signals(request_stop: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop)
    loop.add_signal_handler(signal.SIGUSR2, _dump_tasks)  # where every coroutine waits, for bug reports


def _start_helpers(
    options: Options,
    config: Config,
    ctx: ServerContext,
    itself: access.Identity,
    console: Console,
    stop: asyncio.Event,
) -> list[asyncio.Task[None]]:
    """The background tasks beside the controllers: the console, the charts, the estimates, the demo."""
    helpers = [
        asyncio.create_task(_pump_decisions(ctx.admission, console, stop), name="decisions"),
        asyncio.create_task(_sample_history(ctx, stop), name="history"),
    ]
    if ctx.estimates is not None:
        helpers.append(asyncio.create_task(ctx.estimates.run(stop), name="estimates"))
    if options.demo and config.demo:
        helpers.append(
            asyncio.create_task(
                _demo(ctx.store, itself, config.demo, console, ctx.owners, config.limits), name="demo"
            )
        )
    return helpers


def _announce(
    options: Options, url: str, token: str, socket_path: Path, client_paths: list[Path], local: _LocalNode
) -> None:
    """Where the server listens, its admin token, the dashboard, and what this machine offers."""
    print(f"pykueue is serving {url} and {socket_path}", flush=True)
    print(f"  admin token: {token}", flush=True)
    # The token rides in the fragment, which a browser never sends: the page keeps it in its session.
    print(f"  dashboard: {url}/dashboard#token={token}", flush=True)
    print(f"  data: {options.data_dir}  (client config: {', '.join(map(str, client_paths))})", flush=True)
    if options.demo and options.client_config is None:
        print(f"  CLI, in another terminal: export PYKUEUE_SOCKET={socket_path}", flush=True)
        print("    (the demo leaves your client config alone: without it the CLI talks to your server)")
    if options.throwaway:
        print("  the data and job folders are removed when the demo stops", flush=True)
    node = local.node
    gpus = ", ".join(f"{f}: {len(d)}" for f, d in node.gpus.items()) or "none"
    print(
        f"  node: {node.cpus} CPUs, {node.memory // 2**20} MiB, GPUs {gpus} ({node.gpu_source})", flush=True
    )
    print(f"  jobs: folders under {local.work_root}", flush=True)
    if local.leftovers:
        print(f"  {local.leftovers}", flush=True)
    for line in local.fences.summary():
        print(f"  {line}", flush=True)


async def _clean_up(local: _LocalNode, socket_path: Path, store: SQLiteStore) -> None:
    """After the API and the controllers stopped: the pods (their grace), the cgroups, the socket, the store."""
    await local.executor.stop_all(SHUTDOWN_GRACE_SECONDS)
    if local.fences.cgroups is not None:
        local.fences.cgroups.remove()
    with contextlib.suppress(OSError):
        socket_path.unlink()
    store.close()


def _leftovers_said(killed: int) -> str:
    if not killed:
        return ""
    return (
        f"killed {killed} process(es) an earlier server on this data left running (it was killed or "
        "crashed); their jobs start again, with PYKUEUE_PREEMPTED=1"
    )


def keep_worker_logs(data_dir: Path, job: Manifest, text: str) -> None:
    """A MultiKueue job's logs, read from its worker before the copy there is collected, kept
    where this server keeps its own jobs' logs (`pykueue logs` reads them; deleting the job
    deletes them)."""
    meta = job["metadata"]
    folder = log_folder(
        data_dir, str(meta.get("namespace") or ""), str(meta["name"]), str(meta.get("uid") or "")
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0.log").write_text(text)


def _tcp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _dump_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(file=sys.stderr)


class _ToConsole(logging.Handler):
    def __init__(self, source: str, console: Console) -> None:
        super().__init__(logging.INFO)
        self.source = source
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        namespace = next((a.namespace for a in args if isinstance(a, Key)), "")
        self.console.record(self.source, record.getMessage(), namespace)


def _forward_logs(logger: str, source: str, console: Console) -> None:
    """Show a controller's INFO log lines (jobs started, stopped, finished) with the decisions."""
    target = logging.getLogger(logger)
    target.setLevel(logging.INFO)
    target.addHandler(_ToConsole(source, console))


async def _supervised(
    name: str, start: Callable[[], Awaitable[None]], stop: asyncio.Event, console: Console
) -> None:
    """Run a controller loop; if it fails, say why and start it again (it resyncs from the store)."""
    while not stop.is_set():
        try:
            await start()
        except Exception as exc:
            console.record(name, f"failed, restarting in 1s: {exc!r}")
            log.exception("%s failed", name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)


async def _freeze_when_loaded(admission: StandaloneAdmission, timeout: float = 30.0) -> None:
    """gc.freeze() once the engine holds the stored state (docs/performance.md)."""
    deadline = time.monotonic() + timeout
    while not admission.versions and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    gc.collect()
    gc.freeze()


def serve(options: Options) -> None:
    """Run until stopped; raises PykueueError (shown as a message by the CLI) on bad input."""
    try:
        config = Config.load(options.config)
        gc_tuning.tune_for_service()
        os.umask(0o077)  # the store, its journal and every log: the server's user's alone
        with data_lock(options.data_dir):
            if options.throwaway:
                for folder in demo.sweep_stale(options.data_dir):
                    print(f"removed the folder of an earlier demo: {folder}", flush=True)
            asyncio.run(_main(options, config))
    finally:
        if options.throwaway:
            demo.remove(options.data_dir, options.work_dir)
