"""Keeps the webhooks of controllers outside the cluster pointed at a replica that is up.

A controller run with ``--local-webhooks`` serves its webhooks (and the CRDs' conversion and,
on a routable address, the visibility API) on its own address, and the API server reaches them
by URL. A webhook configuration holds one URL, so with several replicas one of them is
registered at a time. Each replica runs `LocalRegistration`, which checks every few seconds:

- the lease holder (or a replica without leader election) registers itself whenever another
  URL is registered: the visibility API answers from the engine, which only the leader runs;
- a standby registers itself only when nothing is registered or the registered URL does not
  accept connections (its replica died), so webhooks stay served while any replica is up;
- a replica never removes a registration when it stops: as with upstream's Deployment,
  requests are refused (failurePolicy Fail) rather than let through unchecked while no replica
  runs, and the next replica to start takes the registration over.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from pykueue import tcp
from pykueue.errors import NotFound, StoreError
from pykueue.kube import deploy
from pykueue.store import kubernetes
from pykueue.store.base import Store

log = logging.getLogger(__name__)

# Seconds between checks: about a lease's retry period, so a takeover after a replica's
# death costs the same order of time as the lease's.
CHECK_SECONDS = 2.0
PROBE_TIMEOUT_SECONDS = 2.0

Probe = Callable[[str], Awaitable[bool]]

# The selector-less Service (and its EndpointSlice) through which the API server reaches the
# visibility API of a controller outside the cluster.
LOCAL_VISIBILITY_SERVICE = "pykueue-local-visibility"


async def accepts_connections(url: str) -> bool:
    """Whether something listens at ``url``'s host and port (a TCP connect; TLS is the server's job)."""
    parts = urlsplit(url)
    if parts.hostname is None:
        return False
    return await tcp.accepts_connections(parts.hostname, parts.port or 443, PROBE_TIMEOUT_SECONDS)


async def registered_url(store: Store) -> str:
    """The server the validating webhooks point at now, ``https://host:port`` ("" when none is)."""
    try:
        config = await store.get("ValidatingWebhookConfiguration", "", deploy.VALIDATING_WEBHOOK)
    except NotFound:
        return ""
    for webhook in config.get("webhooks") or []:
        url = (webhook.get("clientConfig") or {}).get("url")
        if url:
            # Each webhook's URL is the server's plus its path: the server is what is registered.
            parts = urlsplit(str(url))
            return f"{parts.scheme}://{parts.netloc}"
    return ""


class LocalRegistration:
    """One replica's side of who is registered (see the module's docstring)."""

    def __init__(
        self,
        store: Store,
        own_url: str,
        register: Callable[[], Awaitable[None]],
        leading: Callable[[], bool],
        probe: Probe = accepts_connections,
        interval: float = CHECK_SECONDS,
    ) -> None:
        self.store = store
        self.own_url = own_url
        self.register = register
        self.leading = leading
        self.probe = probe
        self.interval = interval

    async def check(self) -> bool:
        """Register this replica if it should be (see the module's docstring); True when it did."""
        current = await registered_url(self.store)
        if current == self.own_url:
            return False
        if current and not self.leading() and await self.probe(current):
            return False
        reason = "the lease holder" if self.leading() else ("none" if not current else f"{current} is down")
        log.info("registering this replica's webhooks at %s (%s)", self.own_url, reason)
        await self.register()
        return True

    async def first_check(self) -> None:
        """The check at start (`check`, for callers that retry on an unreachable API server)."""
        await self.check()

    async def run(self, stop: asyncio.Event) -> None:
        """Check every `interval` seconds until ``stop``; an unreachable API server is retried."""
        while not stop.is_set():
            try:
                await self.check()
            except StoreError as exc:
                log.warning("cannot check the webhooks' registration (%s); retrying", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)


async def register_local_visibility(
    store: kubernetes.KubernetesStore, host: str, port: int, namespace: str, ca_bundle: bytes
) -> None:
    """Point the visibility APIServices at ``host:port``.

    An EndpointSlice holds IP addresses, and the API server refuses loopback ones: with a
    name or a loopback ``host`` the API is left unregistered, with a warning saying why.
    """
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        log.warning(
            "the visibility API is not registered with the API server: --webhook-host %s is not an "
            "IP address (an EndpointSlice holds addresses)",
            host,
        )
        return
    if loopback:
        log.warning(
            "the visibility API is not registered with the API server: --webhook-host %s is a loopback "
            "address, which the API server refuses as an endpoint (give the host's address to serve it)",
            host,
        )
        return
    for doc in deploy.external_endpoint(LOCAL_VISIBILITY_SERVICE, namespace, host, port):
        await store.apply(doc, field_manager=deploy.INSTALL_FIELD_MANAGER)
    for doc in deploy.api_services(LOCAL_VISIBILITY_SERVICE, namespace, ca_bundle=ca_bundle):
        await store.apply(doc, field_manager=deploy.INSTALL_FIELD_MANAGER)
    log.info("visibility API registered at https://%s:%d", host, port)
