"""`pykueue up`: one process with the store, the controllers, the executor and the HTTP API.

Start-up order matters for crash safety:

1. take the data folder's lock (a second server on the same store would run
   every job twice), held by the OS until this process dies, even by kill -9;
2. open the store and kill whatever an earlier server on it left running
   (`LocalExecutor.kill_leftovers`), before anything may start;
3. make sure an admin token exists (only its hash is stored; the token itself
   goes to the 0600 client config the CLI reads);
4. apply the config's manifests (or, on an empty store without any, a
   ``main`` ClusterQueue sized to this machine) as the admin would;
5. run the admission controller, the job reconciler, the executor and the API
   on one event loop; freeze the loaded state out of the garbage collector.

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
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import uvicorn
import yaml

from pykueue.controllers.executor import LocalExecutor
from pykueue.controllers.node import GPU_RESOURCE, Node, discover
from pykueue.controllers.standalone import StandaloneManager
from pykueue.controllers.workloads import StandaloneAdmission
from pykueue.errors import InputError, NotFound, PykueueError
from pykueue.server import applying, auth
from pykueue.server.app import ServerContext, create_app
from pykueue.store.sqlite import SQLiteStore

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


@dataclass
class Config:
    """The ``--config`` file: node GPUs, manifests applied at start, demo phases."""

    gpus: list[dict[str, Any]] = field(default_factory=list)
    manifests: list[Path] = field(default_factory=list)
    demo: list[tuple[float, Path]] = field(default_factory=list)

    @staticmethod
    def load(path: Path | None) -> Config:
        if path is None:
            return Config()
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"{path}: cannot read the config: {exc}") from None
        if not isinstance(raw, dict):
            raise InputError(f"{path}: the config must be a mapping")
        base = path.parent
        node = raw.get("node") or {}
        return Config(
            gpus=[dict(g) for g in node.get("gpus") or []],
            manifests=[base / str(p) for p in raw.get("manifests") or []],
            demo=[(float(d.get("after", 0)), base / str(d["file"])) for d in raw.get("demo") or []],
        )


class Console:
    """Where decisions and executor events are printed (and kept for /api/v1/events)."""

    def __init__(self, ctx_events: list[dict[str, Any]], out: TextIO | None) -> None:
        self.events = ctx_events
        self.out = out
        self.started = time.monotonic()

    def record(self, source: str, message: str) -> None:
        elapsed = time.monotonic() - self.started
        self.events.append({"seconds": round(elapsed, 3), "source": source, "message": message})
        if self.out is not None:
            print(f"[{elapsed:7.2f}s] {source:<9} {message}", file=self.out, flush=True)


@contextlib.contextmanager
def data_lock(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True)
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


def write_client_config(path: Path, server: str, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"server": server, "token": token}, out)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


async def ensure_admin(store: SQLiteStore, known: list[Path]) -> str:
    """The admin token: the one in a client config if it still matches, else a new one."""
    try:
        current = await store.get(auth.IDENTITY_KIND, "", "admin")
    except NotFound:
        current = None
    if current is not None:
        for path in known:
            with contextlib.suppress(OSError, ValueError, KeyError):
                token = str(json.loads(path.read_text())["token"])
                if auth.token_hash(token) == current["spec"].get("tokenSha256"):
                    return token
    token = auth.new_token()
    manifest = auth.identity_manifest(auth.Identity("admin", auth.ADMIN), token)
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


async def _apply_files(store: SQLiteStore, admin: auth.Identity, paths: list[Path], console: Console) -> None:
    files = [{"name": str(p), "text": p.read_text()} for p in paths]
    result = await applying.apply(store, admin, files)
    for action in result.actions:
        where = f"{action['namespace']}/" if action["namespace"] else ""
        console.record("apply", f"{action['kind']} {where}{action['name']} {action['action']}")


async def _demo(
    store: SQLiteStore, admin: auth.Identity, phases: list[tuple[float, Path]], console: Console
) -> None:
    started = time.monotonic()
    for after, path in phases:
        await asyncio.sleep(max(0.0, started + after - time.monotonic()))
        console.record("demo", f"applying {path.name}")
        try:
            await _apply_files(store, admin, [path], console)
        except PykueueError as exc:
            console.record("demo", f"refused: {exc}")
    console.record(
        "demo",
        "all demo jobs submitted; in another terminal try: pykueue get clusterqueues | pykueue get jobs"
        " | pykueue describe workload eval -n research | pykueue logs train-big -n research",
    )


async def _pump_decisions(admission: StandaloneAdmission, console: Console, stop: asyncio.Event) -> None:
    seen = 0
    while not stop.is_set():
        events = admission.decisions
        seen = min(seen, len(events))  # a resync starts a new list
        for event in events[seen:]:
            console.record("engine", f"{event.type} {event.workload}: {event.message}")
        seen = len(events)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.2)


async def _main(options: Options, config: Config) -> None:
    with contextlib.suppress(AttributeError, NotImplementedError, OSError):
        watcher = asyncio.PidfdChildWatcher()  # no thread per child process, unlike the default
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)
    data_dir = options.data_dir
    store = SQLiteStore(data_dir / "pykueue.db")
    events: list[dict[str, Any]] = []
    console = Console(events, None if options.quiet else sys.stdout)
    node = discover(config.gpus)
    executor = LocalExecutor(
        store,
        node,
        data_dir,
        marker=str(store.path.resolve()),
        record=lambda m: console.record("executor", m),
    )
    left = executor.kill_leftovers()
    if left:
        raise PykueueError(f"{left} process(es) of an earlier server would not die; not starting")
    client_paths = [p for p in (options.client_config, data_dir / "client.json") if p is not None]
    token = await ensure_admin(store, client_paths)
    admin = auth.Identity("admin", auth.ADMIN)
    if config.manifests:
        await _apply_files(store, admin, config.manifests, console)
    elif not (await store.list("ClusterQueue"))[0]:
        await applying.apply(store, admin, [{"name": "default-queues", "text": default_queues(node)}])
        console.record("apply", "created ClusterQueue main and LocalQueue default/main sized to this machine")
    manager = StandaloneManager(store, resync_seconds=0.5)
    admission = manager.admission
    _forward_logs("pykueue.controllers.job_reconciler", "jobs", console)
    port = options.port or free_port(options.host)
    url = f"http://{options.host}:{port}"
    ctx = ServerContext(
        store=store,
        admission=admission,
        manager=manager,
        executor=executor,
        authenticator=auth.Authenticator(store),
        node=node,
        data_dir=data_dir,
        events=events,
    )
    server = _Server(
        uvicorn.Config(create_app(ctx), host=options.host, port=port, log_level="warning", lifespan="off")
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def request_stop() -> None:
        server.should_exit = True
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, request_stop)
    loop.add_signal_handler(signal.SIGUSR2, _dump_tasks)  # where every coroutine waits, for bug reports
    tasks = [
        asyncio.create_task(_supervised("manager", lambda: manager.run(stop), stop, console)),
        asyncio.create_task(_supervised("executor", lambda: executor.run(stop), stop, console)),
    ]
    helpers = [asyncio.create_task(_pump_decisions(admission, console, stop), name="decisions")]
    if options.demo and config.demo:
        helpers.append(asyncio.create_task(_demo(store, admin, config.demo, console), name="demo"))
    for path in client_paths:
        write_client_config(path, url, token)
    print(f"pykueue is serving {url}", flush=True)
    print(f"  admin token: {token}", flush=True)
    print(f"  data: {data_dir}  (client config: {', '.join(map(str, client_paths))})", flush=True)
    gpus = ", ".join(f"{f}: {len(d)}" for f, d in node.gpus.items()) or "none"
    print(
        f"  node: {node.cpus} CPUs, {node.memory // 2**20} MiB, GPUs {gpus} ({node.gpu_source})", flush=True
    )
    serving = asyncio.create_task(server.serve(), name="api")
    await _freeze_when_loaded(admission)
    done, _ = await asyncio.wait([serving, *tasks], return_when=asyncio.FIRST_COMPLETED)
    failed = [t for t in done if not t.cancelled() and t.exception() is not None]
    request_stop()
    await asyncio.gather(serving, *tasks, *helpers, return_exceptions=True)
    await executor.stop_all(SHUTDOWN_GRACE_SECONDS)
    store.close()
    if failed:
        error = failed[0].exception()
        assert error is not None
        raise error


def _dump_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(file=sys.stderr)


class _ToConsole(logging.Handler):
    def __init__(self, source: str, console: Console) -> None:
        super().__init__(logging.INFO)
        self.source = source
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        self.console.record(self.source, record.getMessage())


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
    config = Config.load(options.config)
    with data_lock(options.data_dir):
        asyncio.run(_main(options, config))
