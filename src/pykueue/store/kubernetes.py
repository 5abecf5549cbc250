"""A `Store` backed by a Kubernetes API server, over a thin async client of our own on aiohttp.

    KubernetesStore ── kinds ──▶ RESOURCES (group, version, plural, namespaced)
         │ get/list/create/update/update_status/delete : one HTTP request each,
         │                                              retried with backoff on 429/5xx
         └ watch(kind, since): GET ...?watch=1&resourceVersion=since, one JSON event a line,
                                resumed from the last version seen when the stream ends,
                                and re-listed when the server says 410 Gone

Manifests stay plain dicts, exactly as the API server sends them (the engine and
the controllers parse what they need with `pykueue.api`), so no generated model
classes sit between the server and us. Items of a list carry no ``kind`` or
``apiVersion`` on the wire; the store adds them so every manifest names itself.

Errors follow the `pykueue.errors` tree: 404 is `NotFound`, 409 is `Conflict` (or
`AlreadyExists` on create), 422 is a `ValidationError` with the server's field paths,
429 and 5xx (and connection failures) are `Unavailable` once the retries are spent.

A watch that gets 410 Gone (its version was compacted away) lists the kind again and
turns the difference into events: every object now stored arrives as ``MODIFIED``
(a consumer skips versions it has seen) and every object it knew that is gone
arrives as ``DELETED``. It knows them from the store's last list of the kind and
from its own stream, so a watcher started right after a list misses nothing.

Credentials come from a kubeconfig or the in-cluster service account
(`pykueue.store.kubeconfig`). One that may change (an exec plugin's) is asked for before each
request; a 401 answer to it makes the store ask again and send the request once more. A new
client certificate from a plugin opens a new connection pool. A plain ``http://`` server (the
tests' scripted fault server) is reached without TLS.

Connections are kept alive and shared by every request and watch of one store, so a
busy controller pays the TLS handshake once per connection, not once per write
(docs/decisions.md says why the client is aiohttp: its cost per request).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import heapq
import itertools
import logging
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from pykueue.errors import (
    AlreadyExists,
    Conflict,
    FieldProblem,
    NotFound,
    PykueueError,
    StoreError,
    Unavailable,
    ValidationError,
)
from pykueue.store import base
from pykueue.store.base import EventType, Key, Manifest, WatchEvent
from pykueue.store.kubeconfig import (
    Credential,
    KubeConfig,
    in_cluster_config,
    load_kubeconfig,
    parse_kubeconfig,
)

__all__ = ["KubeConfig", "KubernetesStore", "in_cluster_config", "load_kubeconfig", "parse_kubeconfig"]

log = logging.getLogger(__name__)

KUEUE = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the API: group ("" for core), version, plural, scope."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


def _kueue(plural: str, namespaced: bool = False) -> Resource:
    return Resource(KUEUE, KUEUE_VERSION, plural, namespaced)


RESOURCES: dict[str, Resource] = {
    "ResourceFlavor": _kueue("resourceflavors"),
    "ClusterQueue": _kueue("clusterqueues"),
    "LocalQueue": _kueue("localqueues", namespaced=True),
    "Cohort": _kueue("cohorts"),
    "Workload": _kueue("workloads", namespaced=True),
    "WorkloadPriorityClass": _kueue("workloadpriorityclasses"),
    "AdmissionCheck": _kueue("admissionchecks"),
    "Topology": _kueue("topologies"),
    "ProvisioningRequestConfig": _kueue("provisioningrequestconfigs"),
    "MultiKueueConfig": _kueue("multikueueconfigs"),
    "MultiKueueCluster": _kueue("multikueueclusters"),
    "Namespace": Resource("", "v1", "namespaces", False),
    "LimitRange": Resource("", "v1", "limitranges", True),
    "Node": Resource("", "v1", "nodes", False),
    "Pod": Resource("", "v1", "pods", True),
    "PodTemplate": Resource("", "v1", "podtemplates", True),
    # The cluster autoscaler's kind, asked for by the ProvisioningRequest admission check.
    "ProvisioningRequest": Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests", True),
    "Event": Resource("", "v1", "events", True),
    "PriorityClass": Resource("scheduling.k8s.io", "v1", "priorityclasses", False),
    "Job": Resource("batch", "v1", "jobs", True),
    "Lease": Resource("coordination.k8s.io", "v1", "leases", True),
    # What `pykueue install` applies besides the queueing kinds.
    "CustomResourceDefinition": Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", False),
    "ServiceAccount": Resource("", "v1", "serviceaccounts", True),
    "Service": Resource("", "v1", "services", True),
    "Secret": Resource("", "v1", "secrets", True),
    "ConfigMap": Resource("", "v1", "configmaps", True),
    "Deployment": Resource("apps", "v1", "deployments", True),
    "ClusterRole": Resource("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "ClusterRoleBinding": Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", True),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "MutatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", False
    ),
    "ValidatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", False
    ),
    # The visibility API's registration with the aggregation layer (and, outside the
    # cluster, the address it is reached at).
    "APIService": Resource("apiregistration.k8s.io", "v1", "apiservices", False),
    "EndpointSlice": Resource("discovery.k8s.io", "v1", "endpointslices", True),
}

# The job kinds of pykueue's integrations (reconcilers/integrations/) beyond batch/v1 Job.
RESOURCES.update(
    {
        "JobSet": Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", True),
        "LeaderWorkerSet": Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", True),
        "PyTorchJob": Resource("kubeflow.org", "v1", "pytorchjobs", True),
        "TFJob": Resource("kubeflow.org", "v1", "tfjobs", True),
        "PaddleJob": Resource("kubeflow.org", "v1", "paddlejobs", True),
        "XGBoostJob": Resource("kubeflow.org", "v1", "xgboostjobs", True),
        "JAXJob": Resource("kubeflow.org", "v1", "jaxjobs", True),
        "MPIJob": Resource("kubeflow.org", "v2beta1", "mpijobs", True),
        "RayJob": Resource("ray.io", "v1", "rayjobs", True),
        "RayCluster": Resource("ray.io", "v1", "rayclusters", True),
        "AppWrapper": Resource("workload.codeflare.dev", "v1beta2", "appwrappers", True),
        "TrainJob": Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", True),
        "TrainingRuntime": Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", True),
        "ClusterTrainingRuntime": Resource(
            "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", False
        ),
        "ResourceClaimTemplate": Resource("resource.k8s.io", "v1", "resourceclaimtemplates", True),
        "StatefulSet": Resource("apps", "v1", "statefulsets", True),
        "ReplicaSet": Resource("apps", "v1", "replicasets", True),
    }
)


def resource_of(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise StoreError(f"the Kubernetes store does not know kind {kind}") from None


# ----------------------------------------------------------------------- store


@dataclass(frozen=True, slots=True)
class Retry:
    """Backoff for retryable answers: attempts, first delay, cap (seconds)."""

    attempts: int = 6
    first: float = 0.1
    cap: float = 5.0

    def delay(self, attempt: int) -> float:
        # Full jitter, so many controllers hitting one recovering server spread out.
        return random.uniform(0, min(self.cap, self.first * 2**attempt))


def resource_of_path(path: str) -> str:
    """``group/resource`` of an API path: ``/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status``
    is ``kueue.x-k8s.io/workloads``, ``/api/v1/namespaces/a`` is ``/namespaces``."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = (parts[1] if len(parts) > 1 else ""), parts[3:]
    else:
        return path
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]
    return f"{group}/{rest[0]}" if rest else group


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; `take` waits for one.

    Waiters are served by `base.request_rank` (then in arrival order), not first come first
    served: a request that matters more does not queue behind the ones that were merely
    sent earlier. A request made under `base.request_spare_only` also leaves half the burst
    in the bucket: it goes only when that many tokens are saved up beyond its own.
    """

    def __init__(self, rate: float, burst: int, clock: Any = None) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self._tokens = float(self.burst)
        self._at: float | None = None
        # Tokens a spare-only request leaves in the bucket (never so many it could not go).
        self.reserve = min(self.burst / 2, self.burst - 1)
        # (spare only, rank, arrival, the waiter, tokens it needs): spare-only ones after the rest.
        self._waiters: list[tuple[bool, tuple[Any, ...], int, asyncio.Future[None], float]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    def _refill(self) -> None:
        now = self._clock()
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    async def take(self) -> None:
        self._refill()
        spare_only = base.request_spare_only.get()
        needed = 1 + self.reserve if spare_only else 1.0
        # Nobody waiting goes before it: every waiter for a spare-only request, the others
        # only before a spare-only one.
        behind = bool(self._waiters) and (spare_only or not self._waiters[0][0])
        if self._tokens >= needed and not behind:
            self._tokens -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (spare_only, base.request_rank.get(), next(self._seq), future, needed)
        heapq.heappush(self._waiters, entry)
        if self._timer is not None and self._waiters[0] is entry:
            self._timer.cancel()  # it was set for a waiter that needs more
            self._timer = None
        self._arm()
        await future  # a cancelled waiter is skipped when its turn comes

    def _arm(self) -> None:
        if self._timer is None and self._waiters:
            # The first in rank waits for what it needs; those after it wait behind it.
            wait = max(0.0, (self._waiters[0][4] - self._tokens) / self.rate)
            self._timer = asyncio.get_running_loop().call_later(wait, self._wake)

    def _wake(self) -> None:
        self._timer = None
        self._refill()
        while self._waiters and self._tokens >= self._waiters[0][4]:
            future = heapq.heappop(self._waiters)[3]
            if future.done():
                continue
            future.set_result(None)
            self._tokens -= 1
        while self._waiters and self._waiters[0][3].done():
            heapq.heappop(self._waiters)
        self._arm()


@dataclass
class KubernetesStore:
    """The `Store` protocol over the Kubernetes REST API."""

    config: KubeConfig
    retry: Retry = field(default_factory=Retry)
    watch_timeout_seconds: int = 300
    request_timeout_seconds: float = 30.0
    field_manager: str = "pykueue"
    # Client-side rate limit as client-go's (--qps/--burst): qps <= 0 means none. One token
    # bucket per API resource (group and resource name; a subresource counts as its resource),
    # as a controller-runtime client gives each kind its own REST client with its own limiter:
    # upstream Kueue's "50 qps, burst 100" is that much for Workloads, and as much again for
    # ClusterQueues, LocalQueues, Events...
    qps: float = 0.0
    burst: int = 10
    # List from the API server's watch cache (see `list_selected`): what a controller that
    # lists to start its watches wants.
    list_from_watch_cache: bool = False
    # Connections kept open to the server: enough for every watch plus the writes a
    # controller pipelines; callers bound their own concurrency.
    max_connections: int = 256
    _session: aiohttp.ClientSession | None = field(default=None, init=False, repr=False)
    _session_loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    # The client certificate the session's connections present (an exec plugin's), and the
    # sessions opened with an earlier one, closed with the store.
    _session_cert: tuple[bytes, bytes] | None = field(default=None, init=False, repr=False)
    _retired: builtins.list[aiohttp.ClientSession] = field(default_factory=list, init=False, repr=False)
    # The keys (and versions) of each kind as last listed, for the 410 re-list diff.
    _listed: dict[str, dict[Key, str]] = field(default_factory=dict, init=False, repr=False)
    _relisted_at: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _limiters: dict[str, TokenBucket] = field(default_factory=dict, init=False, repr=False)

    # ------------------------------------------------------------- plumbing

    @property
    def session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is not None and self._session_loop is not loop:
            # Opened under an event loop that has ended (one `asyncio.run` per CLI call or
            # test): its connections belong to that loop, so start afresh.
            self._session = None
            self._retired.clear()
        if self._session is None:
            self._session_loop = loop
            plain = self.config.server.startswith("http://")
            connector = aiohttp.TCPConnector(
                ssl=False if plain else self.config.ssl_context(self._session_cert),
                limit=self.max_connections,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.request_timeout_seconds),
                headers={"Accept": "application/json", "User-Agent": "pykueue"},
                raise_for_status=False,
            )
        return self._session

    async def close(self) -> None:
        sessions = [*self._retired, *([self._session] if self._session is not None else [])]
        self._session = None
        self._retired.clear()
        for session in sessions:
            await session.close()

    async def __aenter__(self) -> KubernetesStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _credential(self) -> Credential:
        """What the next request authenticates with (an exec plugin runs when its answer expired)."""
        auth = self.config.auth
        if auth is None:
            return Credential(token=self.config.bearer_token())
        credential = await auth.credential()
        cert = credential.client_cert
        if cert != self._session_cert:
            # The TLS client certificate belongs to the connection pool: new certificate, new
            # pool. Requests under way finish on the old one, closed with the store.
            if self._session is not None:
                self._retired.append(self._session)
                self._session = None
            self._session_cert = cert
        if credential.token is None:
            return Credential(self.config.bearer_token(), credential.cert_data, credential.key_data)
        return credential

    def _rejected(self, status: int, credential: Credential) -> bool:
        """A 401 to a credential that may change: forget it; True to send the request again."""
        auth = self.config.auth
        return status == 401 and auth is not None and auth.rejected(credential)

    def _connection_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.config.tls_server_name:
            options["server_hostname"] = self.config.tls_server_name
        if self.config.proxy_url:
            options["proxy"] = self.config.proxy_url
        return options

    @staticmethod
    def _headers(credential: Credential, content_type: str = "") -> dict[str, str]:
        headers = {"Authorization": f"Bearer {credential.token}"} if credential.token else {}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        params: Mapping[str, str] | None,
        content_type: str = "application/json",
    ) -> Answer:
        """One HTTP exchange, read whole; transport failures are `Unavailable`. A 401 to a
        credential that may change is answered by sending the request once more with a new one."""
        for first in (True, False):
            credential = await self._credential()
            try:
                async with self.session.request(
                    method,
                    self.config.server + path,
                    data=data,
                    params=dict(params or {}),
                    headers=self._headers(credential, content_type if data is not None else ""),
                    **self._connection_options(),
                ) as response:
                    answer = Answer(
                        response.status, await response.read(), response.headers.get("Retry-After")
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise Unavailable(f"{method} {path}: {transport_problem(exc)}") from exc
            if not (first and self._rejected(answer.status, credential)):
                break
        return answer

    async def request(
        self,
        method: str,
        path: str,
        body: Manifest | None = None,
        params: Mapping[str, str] | None = None,
        what: str = "",
    ) -> Manifest:
        """One API call with retries on 429/5xx and connection errors; the decoded answer."""
        limiter = self._limiter_of(path) if self.qps > 0 else None
        data = None if body is None else orjson.dumps(body)
        for attempt in range(self.retry.attempts):
            if limiter is not None:
                await limiter.take()
            on_its_way = base.request_on_its_way.get()
            if on_its_way is not None:
                on_its_way()
            try:
                answer = await self._send(method, path, data, params)
            except Unavailable as exc:
                error: PykueueError = exc
                wait = self.retry.delay(attempt)
            else:
                if answer.status < 300:
                    result: Manifest = orjson.loads(answer.body)
                    return result
                error = _error_of(answer, what or path, method)
                if not isinstance(error, Unavailable):
                    raise error
                wait = _retry_after(answer) or self.retry.delay(attempt)
            if attempt + 1 < self.retry.attempts:
                log.debug("retrying %s %s in %.2fs: %s", method, path, wait, error)
                await asyncio.sleep(wait)
        raise error

    def _limiter_of(self, path: str) -> TokenBucket:
        resource = resource_of_path(path)
        limiter = self._limiters.get(resource)
        if limiter is None:
            limiter = self._limiters[resource] = TokenBucket(self.qps, self.burst)
        return limiter

    # ---------------------------------------------------------------- reading

    async def get(self, kind: str, namespace: str, name: str) -> Manifest:
        res = resource_of(kind)
        obj = await self.request("GET", res.path(namespace, name), what=str(Key(kind, namespace, name)))
        return _named(obj, kind, res)

    async def list(self, kind: str, namespace: str | None = None) -> tuple[list[Manifest], str]:
        items, version = await self.list_selected(kind, namespace)
        if namespace is None:
            self._listed[kind] = {Key.of(obj): _rv(obj) for obj in items}
        return items, version

    async def list_selected(
        self, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> tuple[builtins.list[Manifest], str]:
        """Like `list`, with a label selector; pages through large collections.

        With ``list_from_watch_cache`` the API server answers from its watch cache
        (``resourceVersion=0``, all at once), as client-go's informers list before they
        watch: no read from etcd, and an answer in moments even while the server is busy.
        It may be a little behind; the watch that starts from its version catches up.
        """
        res = resource_of(kind)
        items: builtins.list[Manifest] = []
        params = {"resourceVersion": "0"} if self.list_from_watch_cache else {"limit": "500"}
        if label_selector:
            params["labelSelector"] = label_selector
        while True:
            page = await self.request("GET", res.path(namespace), params=params, what=kind)
            items.extend(_named(obj, kind, res) for obj in page.get("items") or [])
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, str(meta.get("resourceVersion") or "")
            params["continue"] = str(meta["continue"])

    # ---------------------------------------------------------------- writing

    async def create(self, obj: Manifest) -> Manifest:
        key, res = Key.of(obj), resource_of(str(obj.get("kind")))
        body = {**obj, "apiVersion": obj.get("apiVersion") or res.api_version}
        namespace = key.namespace or ("default" if res.namespaced else "")
        created = await self.request(
            "POST", res.path(namespace), body, {"fieldManager": self.field_manager}, str(key)
        )
        return _named(created, key.kind, res)

    async def update(self, obj: Manifest) -> Manifest:
        return await self._put(obj, "")

    async def update_status(self, obj: Manifest) -> Manifest:
        return await self._put(obj, "/status")

    async def _put(self, obj: Manifest, sub: str) -> Manifest:
        key, res = Key.of(obj), resource_of(str(obj.get("kind")))
        body = {**obj, "apiVersion": obj.get("apiVersion") or res.api_version}
        path = res.path(key.namespace, key.name) + sub
        written = await self.request("PUT", path, body, {"fieldManager": self.field_manager}, str(key))
        return _named(written, key.kind, res)

    async def apply(self, obj: Manifest, force: bool = True, field_manager: str = "") -> Manifest:
        """Server-side apply (not part of `Store`): create or update the fields we own
        (as ``field_manager``, default the store's)."""
        key, res = Key.of(obj), resource_of(str(obj.get("kind")))
        namespace = key.namespace or ("default" if res.namespaced else "")
        path = res.path(namespace, key.name)
        manager = field_manager or self.field_manager
        params = {"fieldManager": manager, "force": "true" if force else "false"}
        data = orjson.dumps(obj)
        for attempt in range(self.retry.attempts):
            try:
                answer = await self._send("PATCH", path, data, params, "application/apply-patch+yaml")
            except Unavailable:
                if attempt + 1 == self.retry.attempts:
                    raise
                await asyncio.sleep(self.retry.delay(attempt))
                continue
            if answer.status < 300:
                applied: Manifest = orjson.loads(answer.body)
                return _named(applied, key.kind, res)
            error = _error_of(answer, str(key), "PATCH")
            if not isinstance(error, Unavailable) or attempt + 1 == self.retry.attempts:
                raise error
            await asyncio.sleep(_retry_after(answer) or self.retry.delay(attempt))
        raise Unavailable(f"{key}: not applied")

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        res = resource_of(kind)
        # Background propagation: a deleted Job takes its pods with it (the API's default orphans them).
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        await self.request("DELETE", res.path(namespace, name), body, what=str(Key(kind, namespace, name)))

    # --------------------------------------------------------------- watching

    async def watch(self, kind: str, since: str) -> AsyncIterator[WatchEvent]:
        res = resource_of(kind)
        known = dict(self._listed.get(kind, {}))
        version = since if since and since != "0" else ""
        failures = 0
        while True:
            if not version:
                # Nothing to resume from: list, report the difference, and watch from there.
                async for event in self._relist(kind, known):
                    yield event
                version = self._relisted_at.get(kind, "")
            params = {
                "watch": "1",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(self.watch_timeout_seconds),
            }
            if version:
                params["resourceVersion"] = version
            try:
                async with contextlib.aclosing(self._stream(res.path(), params)) as stream:
                    async for kind_of_event, obj in stream:
                        failures = 0
                        if kind_of_event == "BOOKMARK":
                            version = _rv(obj) or version
                            continue
                        if kind_of_event == "ERROR":
                            if obj.get("code") == 410:
                                log.info("watch of %s expired at %s: listing again", kind, version)
                                version = ""
                                break
                            raise _status_error(obj, kind)
                        item = _named(obj, kind, res)
                        version = _rv(item) or version
                        if kind_of_event == "DELETED":
                            known.pop(Key.of(item), None)
                        else:
                            known[Key.of(item)] = version
                        yield WatchEvent(_event_type(kind_of_event), item, version)
            except Gone:
                log.info("watch of %s expired at %s: listing again", kind, version)
                version = ""
            except (Unavailable, aiohttp.ClientError, TimeoutError) as exc:
                failures += 1
                log.debug("watch of %s interrupted: %r", kind, exc)
                await asyncio.sleep(self.retry.delay(min(failures, 8)))

    async def _relist(self, kind: str, known: dict[Key, str]) -> AsyncIterator[WatchEvent]:
        items, version = await self.list_selected(kind)
        self._relisted_at[kind] = version
        current = {Key.of(obj): obj for obj in items}
        for key in [k for k in known if k not in current]:
            meta = {"name": key.name, "namespace": key.namespace} if key.namespace else {"name": key.name}
            gone: Manifest = {"apiVersion": resource_of(kind).api_version, "kind": kind, "metadata": meta}
            known.pop(key)
            yield WatchEvent("DELETED", gone, version)
        for key, obj in current.items():
            if known.get(key) == _rv(obj):
                continue
            event_type: EventType = "MODIFIED" if key in known else "ADDED"
            known[key] = _rv(obj)
            yield WatchEvent(event_type, obj, version)

    async def _stream(
        self, path: str, params: Mapping[str, str]
    ) -> AsyncGenerator[tuple[str, Manifest], None]:
        # The server ends a watch after timeoutSeconds; a read that outlasts it means a dead link.
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=self.request_timeout_seconds,
            sock_read=self.watch_timeout_seconds + 30.0,
        )
        credential = await self._credential()
        async with self.session.get(
            self.config.server + path,
            params=dict(params),
            headers=self._headers(credential),
            timeout=timeout,
            **self._connection_options(),
        ) as response:
            if response.status == 410:
                raise Gone(path)
            if self._rejected(response.status, credential):
                # The watch loop starts again, with a new credential.
                raise Unavailable(f"WATCH {path}: credentials refused (401); asking for new ones")
            if response.status >= 300:
                answer = Answer(response.status, await response.read(), response.headers.get("Retry-After"))
                raise _error_of(answer, path, "WATCH")
            # Split lines ourselves: an event is one line of any length (aiohttp's own line
            # reader refuses lines longer than its buffer, and a big object makes one).
            pending = b""
            async for chunk in response.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = orjson.loads(line)
                        yield str(event.get("type", "")), event.get("object") or {}


class Gone(StoreError):
    """The watched version is older than what the server keeps (410); list again."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer read whole: status, body bytes, and the Retry-After header if any."""

    status: int
    body: bytes
    retry_after: str | None = None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


# --------------------------------------------------------------------- helpers


def _named(obj: Manifest, kind: str, res: Resource) -> Manifest:
    obj.setdefault("kind", kind)
    obj.setdefault("apiVersion", res.api_version)
    return obj


def _event_type(text: str) -> EventType:
    if text == "ADDED":
        return "ADDED"
    if text == "DELETED":
        return "DELETED"
    return "MODIFIED"


def _rv(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _retry_after(answer: Answer) -> float | None:
    with contextlib.suppress(ValueError, TypeError):
        return min(30.0, float(answer.retry_after or ""))
    return None


def _error_of(answer: Answer, what: str, method: str) -> PykueueError:
    try:
        status = orjson.loads(answer.body)
    except ValueError:
        status = {"code": answer.status, "message": answer.text[:500]}
    if not isinstance(status, dict):
        status = {"code": answer.status, "message": str(status)[:500]}
    status.setdefault("code", answer.status)
    return _status_error(status, what, method)


def transport_problem(exc: BaseException) -> str:
    """A failure to exchange with the server, in a few words (an aiohttp error's repr dumps its
    connection key and nested exceptions into every message that quotes it)."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        cause = exc.certificate_error
        detail = getattr(cause, "verify_message", "") or str(cause)
        return f"the TLS certificate of {exc.host}:{exc.port} is not trusted ({detail})"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve host {exc.host} ({exc.os_error.strerror or exc.os_error})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        error = exc.os_error
        errno = error.errno if isinstance(error.errno, int) and error.errno > 0 else 0
        detail = os.strerror(errno) if errno else (error.strerror or str(error))
        return f"cannot connect to {exc.host}:{exc.port} ({detail})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__


def _status_error(status: Mapping[str, Any], what: str, method: str = "") -> PykueueError:
    """A metav1.Status as the matching error of `pykueue.errors`, carrying the answer's code and reason."""
    error = _status_error_of(status, what, method)
    if isinstance(error, StoreError):
        error.http_status = int(status.get("code") or 0)
        error.http_reason = str(status.get("reason") or "")
        error.http_message = str(status.get("message") or "")
    return error


def _status_error_of(status: Mapping[str, Any], what: str, method: str) -> PykueueError:
    code = int(status.get("code") or 0)
    message = f"{what}: {status.get('message') or status.get('reason') or code}"
    if code == 404:
        return NotFound(message)
    if code == 409:
        if status.get("reason") == "AlreadyExists" or method == "POST":
            return AlreadyExists(message)
        return Conflict(message)
    if code == 410:
        return Gone(message)
    if code == 422 or (code == 400 and (status.get("details") or {}).get("causes")):
        causes = (status.get("details") or {}).get("causes") or []
        problems = [
            FieldProblem(str(c.get("field") or ""), str(c.get("message") or c.get("reason") or ""), what)
            for c in causes
        ] or [FieldProblem("", message, what)]
        return ValidationError(problems)
    if code == 429 or code >= 500 or code == 0:
        return Unavailable(message)
    return StoreError(f"{message} (HTTP {code})")
