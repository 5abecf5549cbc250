"""MultiKueueClusters: a connection to each worker cluster and its ``Active`` condition.

A MultiKueueCluster names where the manager finds the worker's kubeconfig:

    spec.clusterSource.kubeConfig.locationType: Secret  ─▶ key ``kubeconfig`` of the Secret
                                                           ``location`` in the controller's namespace
                                                Path    ─▶ a file on the manager's machine
                                                           (only when ``allow_path`` is on)

Every poll this module reads the kubeconfig again, keeps one `KubernetesStore` per
cluster (a new one when the kubeconfig changed), asks the worker's API server for
``/version``, and writes ``Active`` (True ``Active``, or False with ``BadConfig`` or
``ClientConnectionFailed``) when it changes. A worker that stops answering keeps its
connection: `Connection.unreachable_since` tells the dispatcher how long it has been gone,
which is what ``workerLostTimeout`` is measured against.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import yaml

from pykueue.errors import NotFound, StoreError
from pykueue.multikueue import messages as multikueue_messages
from pykueue.store import kubernetes
from pykueue.store.base import Manifest, Store

log = logging.getLogger(__name__)

KIND = "MultiKueueCluster"
SECRET_KEY = "kubeconfig"
# A worker that takes longer than this to answer counts as unreachable for this poll.
PROBE_TIMEOUT_SECONDS = 5.0


class BadConfig(Exception):
    """The cluster's kubeconfig cannot be read or used; the message names where it came from."""


class WorkerStore(Protocol):
    """What the MultiKueue controller does to a worker: a worker's API server (`KubernetesStore`),
    or a standalone pykueue server (`pykueue.multikueue.standalone_workers.WorkerClient`)."""

    async def list(self, kind: str, namespace: str | None = None) -> tuple[builtins.list[Manifest], str]: ...

    async def list_selected(
        self, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> tuple[builtins.list[Manifest], str]: ...

    async def create(self, obj: Manifest) -> Manifest: ...

    async def delete(self, kind: str, namespace: str, name: str) -> None: ...

    async def close(self) -> None: ...


@dataclass
class Connection:
    """One worker cluster as the manager sees it now."""

    name: str
    store: WorkerStore | None = None
    # What the store was made from, to notice a changed kubeconfig.
    source: object = None
    active: bool = False
    reason: str = "Unknown"
    message: str = ""
    unreachable_since: datetime | None = None


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def kubeconfig_location(cluster: Manifest) -> tuple[str, str]:
    """(locationType, location) of a MultiKueueCluster; `BadConfig` when it has none."""
    name = (cluster.get("metadata") or {}).get("name")
    source = (cluster.get("spec") or {}).get("clusterSource") or {}
    kube_config = source.get("kubeConfig")
    if not kube_config:
        if source.get("clusterProfileRef"):
            raise BadConfig(
                f"MultiKueueCluster {name}: spec.clusterSource.clusterProfileRef is not supported yet"
            )
        raise BadConfig(f"MultiKueueCluster {name}: spec.clusterSource.kubeConfig is required")
    return str(kube_config.get("locationType") or "Secret"), str(kube_config.get("location") or "")


def kubeconfig_from_secret(secret: Manifest) -> kubernetes.KubeConfig:
    """The kubeconfig in a Secret's ``kubeconfig`` key; its credentials must be inline."""
    meta = secret.get("metadata") or {}
    where = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    encoded = (secret.get("data") or {}).get(SECRET_KEY)
    if not encoded:
        raise BadConfig(f"{where}: data.{SECRET_KEY} is missing")
    try:
        doc = yaml.safe_load(base64.b64decode(encoded))
        return kubernetes.parse_kubeconfig(doc or {}, f"{where} data.{SECRET_KEY}", None)
    except (binascii.Error, yaml.YAMLError, KeyError, TypeError, ValueError, StoreError) as exc:
        raise BadConfig(f"{where}: data.{SECRET_KEY}: {exc}") from exc


@dataclass
class ClusterConnections:
    """The manager's connections to its workers, kept in step with the MultiKueueClusters."""

    store: Store
    # Where the kubeconfig Secrets live (upstream: the namespace Kueue runs in).
    namespace: str
    clock: Callable[[], datetime]
    allow_path: bool = True
    connections: dict[str, Connection] = field(default_factory=dict)

    async def refresh(self) -> None:
        """Read every MultiKueueCluster, connect, probe, and write the Active conditions that changed."""
        clusters, _ = await self.store.list(KIND)
        seen = set()
        for cluster in clusters:
            name = str(cluster["metadata"]["name"])
            seen.add(name)
            connection = self.connections.setdefault(name, Connection(name))
            await self._connect(connection, cluster)
            await self._write_active(connection, cluster)
        for name in set(self.connections) - seen:
            await self._close(self.connections.pop(name))

    async def close(self) -> None:
        for connection in self.connections.values():
            await self._close(connection)
        self.connections.clear()

    def active(self, name: str) -> WorkerStore | None:
        connection = self.connections.get(name)
        return connection.store if connection is not None and connection.active else None

    async def _close(self, connection: Connection) -> None:
        if connection.store is not None:
            await connection.store.close()
            connection.store = None

    async def _config(self, cluster: Manifest) -> tuple[object, Any]:
        location_type, location = kubeconfig_location(cluster)
        name = cluster["metadata"]["name"]
        if location_type == "Path":
            if not self.allow_path:
                raise BadConfig(f"MultiKueueCluster {name}: locationType Path is not allowed (use a Secret)")
            try:
                return (location_type, location), kubernetes.load_kubeconfig(location)
            except (OSError, yaml.YAMLError, KeyError, StoreError) as exc:
                raise BadConfig(f"MultiKueueCluster {name}: kubeconfig file {location}: {exc}") from exc
        try:
            secret = await self.store.get("Secret", self.namespace, location)
        except NotFound:
            raise BadConfig(
                f"MultiKueueCluster {name}: Secret {self.namespace}/{location} not found"
            ) from None
        version = (secret.get("metadata") or {}).get("resourceVersion")
        return (location_type, location, version), kubeconfig_from_secret(secret)

    async def _connect(self, connection: Connection, cluster: Manifest) -> None:
        try:
            source, config = await self._config(cluster)
        except BadConfig as exc:
            await self._close(connection)
            connection.source = None
            self._mark(connection, False, "BadConfig", str(exc))
            return
        if connection.store is None or connection.source != source:
            await self._close(connection)
            connection.source = source
            connection.store = self._open(config)
        try:
            await self._probe(connection.store)
        except StoreError as exc:
            server = str(getattr(config, "server", "") or "")
            message = multikueue_messages.worker_failed(connection.name, server, exc)
            self._mark(connection, False, "ClientConnectionFailed", message)
            return
        self._mark(connection, True, "Active", "Connected")

    def _open(self, config: Any) -> WorkerStore:
        """A client of the worker ``config`` (what `_config` read) describes."""
        # One attempt per call: a lost worker must not hold the manager's poll in retries.
        return kubernetes.KubernetesStore(
            config, retry=kubernetes.Retry(attempts=1), request_timeout_seconds=PROBE_TIMEOUT_SECONDS
        )

    async def _probe(self, store: WorkerStore) -> None:
        """Raise `StoreError` unless the worker answers."""
        assert isinstance(store, kubernetes.KubernetesStore)
        await store.request("GET", "/version")

    def _mark(self, connection: Connection, active: bool, reason: str, message: str) -> None:
        if connection.active != active:
            log.info("MultiKueueCluster %s: Active=%s %s", connection.name, active, message)
        if active:
            connection.unreachable_since = None
        elif connection.unreachable_since is None:
            connection.unreachable_since = self.clock()
        connection.active, connection.reason, connection.message = active, reason, message

    async def _write_active(self, connection: Connection, cluster: Manifest) -> None:
        conditions = list((cluster.get("status") or {}).get("conditions") or [])
        current = next((c for c in conditions if c.get("type") == "Active"), None)
        status = "True" if connection.active else "False"
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            status,
            connection.reason,
            connection.message,
        ):
            return
        wanted = {
            "type": "Active",
            "status": status,
            "reason": connection.reason,
            "message": connection.message[:32768],
            "observedGeneration": int((cluster.get("metadata") or {}).get("generation") or 0),
            "lastTransitionTime": _time(self.clock())
            if current is None or current.get("status") != status
            else current.get("lastTransitionTime"),
        }
        updated = copy.deepcopy(cluster)
        updated.setdefault("status", {})["conditions"] = [
            c for c in conditions if c.get("type") != "Active"
        ] + [wanted]
        try:
            await self.store.update_status(updated)
        except StoreError as exc:
            log.warning("MultiKueueCluster %s: cannot write its status: %s", connection.name, exc)
