"""MultiKueue between standalone servers: one `pykueue up` queues, others run the jobs.

A standalone manager answers the MultiKueue admission check with the same controller as
the Kubernetes one (`pykueue.multikueue.controller`: dispatch, first reservation wins,
status mirroring, ``workerLostTimeout``, collection); only the way it reaches a worker
differs. A worker is another `pykueue up`, reached over its HTTP API with a bearer token,
as any client reaches it:

    MultiKueueCluster gpu1
      spec.clusterSource.kubeConfig: {locationType: Path, location: /etc/pykueue/gpu1.yaml}
                                                   │
                                                   ▼
      /etc/pykueue/gpu1.yaml     server: http://gpu1.lab:8642
                                 token: pk_...            (or tokenFile: gpu1.token)

The file is read again on every poll, so a new token or address takes effect without a
restart. A worker's own ``client.json`` (what its ``up`` writes) has this shape too.

`WorkerClient` does to a worker what the controller would do to an API server, through the
worker's ordinary routes: list (``GET /api/v1/objects/{kind}``; label selectors are matched
here), create (``POST /api/v1/apply``, so the worker checks, authorizes and owns the copy
like any submitted job), delete (``DELETE /api/v1/objects/...``), and a job's logs
(``GET /api/v1/logs/...``, for ``pykueue logs`` on the manager).
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import yaml

from pykueue.errors import AlreadyExists, Conflict, NotFound, StoreError, Unavailable
from pykueue.multikueue import controller as multikueue
from pykueue.multikueue import dispatching
from pykueue.multikueue.clusters import BadConfig, ClusterConnections, WorkerStore
from pykueue.reconcilers.jobframework import MULTIKUEUE_WORKLOAD_ANNOTATION, MultiKueueAdapter
from pykueue.store.base import Key, Manifest

log = logging.getLogger(__name__)

# A worker slower than this counts as unreachable for this call (a lost worker must not
# hold the manager's poll).
REQUEST_TIMEOUT_SECONDS = 5.0
# Refusals remembered per worker, at most (one per job waiting for a worker that takes it).
MAX_REFUSALS = 4096
WORKER_FILE_KEYS = frozenset({"server", "token", "tokenFile", "socket"})


@dataclass(frozen=True)
class WorkerAddress:
    """Where a worker listens and the token the manager uses there."""

    server: str
    token: str


def worker_file(cluster: Manifest) -> Path:
    """The worker file a MultiKueueCluster names; `BadConfig` naming the field otherwise."""
    name = (cluster.get("metadata") or {}).get("name")
    source = (cluster.get("spec") or {}).get("clusterSource") or {}
    kube_config = source.get("kubeConfig")
    if not kube_config:
        raise BadConfig(
            f"MultiKueueCluster {name}: spec.clusterSource.kubeConfig is required "
            "(locationType: Path, location: a file with the worker's server and token)"
        )
    location_type = str(kube_config.get("locationType") or "Secret")
    if location_type != "Path":
        raise BadConfig(
            f"MultiKueueCluster {name}: spec.clusterSource.kubeConfig.locationType must be Path in "
            f"standalone mode (got {location_type}): location names a file with the worker's server and token"
        )
    return Path(str(kube_config.get("location") or ""))


def load_worker_file(path: Path, cluster: str) -> WorkerAddress:
    """A worker file's server and token; `BadConfig` naming the file and the key at fault."""
    where = f"MultiKueueCluster {cluster}: worker file {path}"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BadConfig(f"{where}: cannot read it: {exc}") from None
    if not isinstance(raw, dict):
        raise BadConfig(f"{where}: must be a mapping with server and token (or tokenFile)")
    unknown = sorted(map(str, set(raw) - WORKER_FILE_KEYS))
    if unknown:
        raise BadConfig(f"{where}: unknown keys {', '.join(unknown)} (known: server, token, tokenFile)")
    server = str(raw.get("server") or "").rstrip("/")
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadConfig(f"{where}: server must be an http:// or https:// URL, not {server!r}")
    token = raw.get("token")
    token_file = raw.get("tokenFile")
    if bool(token) == bool(token_file):
        raise BadConfig(f"{where}: give exactly one of token and tokenFile")
    if token_file:
        token_path = path.parent / str(token_file)
        try:
            token = token_path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadConfig(f"{where}: tokenFile {token_path}: {exc}") from None
        if not token:
            raise BadConfig(f"{where}: tokenFile {token_path} is empty")
    return WorkerAddress(server, str(token))


def _matches(obj: Manifest, label_selector: str) -> bool:
    """``key=value[,key=value]`` selectors, the only kind the controller sends."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, label_selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


class WorkerClient:
    """A standalone worker's HTTP API, as the part of a store the MultiKueue controller uses."""

    def __init__(self, address: WorkerAddress, timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        self.address = address
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        # The worker's last refusal of a copy, by the manager's Workload it was for (shown to
        # the user in the check's message while no worker takes the job).
        self.refusals: dict[Key, str] = {}

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self.address.token}"},
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        url = self.address.server + path
        try:
            async with self._open_session().request(method, url, json=body) as response:
                status = response.status
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unavailable(f"{self.address.server}: {type(exc).__name__}: {exc}") from None
        answer = _json_or_text(text) if text else None
        if status >= 400:
            raise _error(status, f"{method} {self.address.server}{path}", answer)
        return status, answer

    async def probe(self) -> None:
        """The worker answers and knows our token."""
        await self._call("GET", "/api/v1/whoami")

    async def list(self, kind: str, namespace: str | None = None) -> tuple[builtins.list[Manifest], str]:
        path = f"/api/v1/objects/{quote(kind)}"
        if namespace:
            path += f"?namespace={quote(namespace)}"
        _, items = await self._call("GET", path)
        return list(items or []), ""

    async def list_selected(
        self, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> tuple[builtins.list[Manifest], str]:
        items, version = await self.list(kind, namespace)
        return [obj for obj in items if _matches(obj, label_selector)], version

    async def create(self, obj: Manifest) -> Manifest:
        """Submit ``obj`` as any client would; `AlreadyExists` when the worker has it already."""
        text = json.dumps(obj)  # JSON is YAML: the worker reads it like any manifest
        meta = obj.get("metadata") or {}
        owner = (meta.get("annotations") or {}).get(MULTIKUEUE_WORKLOAD_ANNOTATION)
        key = Key("Workload", str(meta.get("namespace") or ""), str(owner or ""))
        try:
            _, answer = await self._call(
                "POST", "/api/v1/apply", {"files": [{"name": "multikueue", "text": text}]}
            )
        except Unavailable:
            raise
        except StoreError as exc:
            if len(self.refusals) >= MAX_REFUSALS:
                self.refusals.clear()  # forgotten ones are learned again at the next attempt
            self.refusals[key] = str(exc)
            raise
        self.refusals.pop(key, None)
        actions = (answer or {}).get("results") or []
        if not actions or actions[0].get("action") != "created":
            raise AlreadyExists(f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')} exists")
        return obj

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        await self._call("DELETE", f"/api/v1/objects/{quote(kind)}/{quote(namespace or '_')}/{quote(name)}")

    async def logs(self, namespace: str, name: str) -> str:
        """A job's logs on the worker (`pykueue logs` on the manager passes them on)."""
        url = f"{self.address.server}/api/v1/logs/{quote(namespace)}/{quote(name)}"
        try:
            async with self._open_session().get(url) as response:
                text = await response.text()
                if response.status >= 400:
                    raise _error(response.status, f"GET {url}", _json_or_text(text))
                return text
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Unavailable(f"{self.address.server}: {type(exc).__name__}: {exc}") from None


def _json_or_text(text: str) -> Any:
    """The worker answers JSON; anything else (a proxy's error page) is kept as text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _error(status: int, what: str, answer: Any) -> StoreError:
    """The worker's refusal as the store error the controller expects, with its own words."""
    detail = answer
    if isinstance(answer, dict):
        detail = "; ".join([str(answer.get("error") or ""), *map(str, answer.get("problems") or [])])
    message = f"{what}: {status}: {detail}"
    if status == 404:
        return NotFound(message)
    if status == 409:
        return Conflict(message)
    if status >= 500:
        return Unavailable(message)
    return StoreError(message)


class StandaloneWorkers(ClusterConnections):
    """`ClusterConnections` whose workers are standalone servers named by worker files."""

    async def _config(self, cluster: Manifest) -> tuple[object, WorkerAddress]:
        name = str(cluster["metadata"]["name"])
        address = load_worker_file(worker_file(cluster), name)
        # The address itself is the source: a changed file makes a new client.
        return address, address

    def _open(self, config: Any) -> WorkerStore:
        assert isinstance(config, WorkerAddress)
        return WorkerClient(config)

    async def _probe(self, store: WorkerStore) -> None:
        assert isinstance(store, WorkerClient)
        await store.probe()

    def client(self, name: str) -> WorkerClient | None:
        """The client of an active worker (for logs), or None."""
        store = self.active(name)
        return store if isinstance(store, WorkerClient) else None


class StandaloneMultiKueue(multikueue.MultiKueueController):
    """The MultiKueue check's controller of a standalone manager: workers are `pykueue up` servers.

    One addition: a worker deletes a job's logs with the job, so before the copy of a
    finished job is collected its logs are fetched and handed to ``keep_logs`` (the
    manager's job, the text), which the server writes where its own jobs' logs go.
    """

    clusters: StandaloneWorkers
    keep_logs: Callable[[Manifest, str], None] | None = None

    def cluster_connections(self) -> StandaloneWorkers:
        return StandaloneWorkers(self.store, self.settings.namespace, self.clock, allow_path=True)

    def prebuilds_any(self) -> bool:
        return False  # a standalone worker takes jobs through its apply route, not Workloads

    def _prebuilds(self, objects: Sequence[Manifest]) -> bool:
        return False

    async def _dispatch_or_elect(
        self,
        workload: Manifest,
        entry: Manifest,
        objects: list[Manifest],
        adapter: MultiKueueAdapter,
        order: list[str],
        remote: Mapping[str, multikueue.Remote],
    ) -> None:
        await super()._dispatch_or_elect(workload, entry, objects, adapter, order, remote)
        await self._say_refused(workload, entry, remote)

    async def _say_refused(
        self, workload: Manifest, entry: Manifest, remote: Mapping[str, multikueue.Remote]
    ) -> None:
        """While every worker that answers refused the job's copy, say so in the check's message
        (``describe`` shows it): a worker refuses what the manager's identity may not do there."""
        key = Key.of(workload)
        if not remote or any(key in seen.jobs for seen in remote.values()):
            return  # a copy is somewhere: it may yet win
        refused = {}
        for name in remote:
            client = self.clusters.client(name)
            reason = None if client is None else client.refusals.get(key)
            if reason is None:
                return  # a worker has not refused it (yet)
            refused[name] = reason
        message = "no worker takes the job: " + "; ".join(f"{n}: {r}" for n, r in sorted(refused.items()))
        if entry.get("message") != message:
            await self._set_check(workload, entry, "Pending", message)

    async def _delete_copy(
        self, cluster: str, key: Key, jobs: list[Manifest], workload: Manifest | None
    ) -> None:
        # A standalone worker's copy is one Job (pods are not a standalone kind).
        for job in jobs:
            if not await self._keep_logs(cluster, key, job):
                return  # the worker did not answer: the copy, and its logs, wait for the next poll
        await super()._delete_copy(cluster, key, jobs, workload)

    async def _keep_logs(self, cluster: str, key: Key, copy_: Manifest) -> bool:
        """Keep the logs of the finished winner's copy; False when they could not be read."""
        mine = self.cache.get(key)
        status = (mine or {}).get("status") or {}
        if self.keep_logs is None or mine is None or status.get("clusterName") != cluster:
            return True
        if not dispatching.is_true(mine, "Finished"):
            return True
        owner = self.registry.owner_of(mine)
        job = None if owner is None else self.job_by_uid(str(owner[1].get("uid") or ""))
        client = self.clusters.client(cluster)
        if job is None or client is None:
            return True
        meta = copy_.get("metadata") or {}
        try:
            text = await client.logs(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        except NotFound:
            return True  # nothing to keep
        except StoreError as exc:
            log.warning("multikueue: cannot read the logs of %s on %s: %s", key, cluster, exc)
            return False
        self.keep_logs(job, text)
        return True
