"""Which replica's local webhooks are registered: the lease holder, else any replica that answers.

Real sockets stand for the replicas: one listening (up), one closed (a replica killed -9).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from pykueue.errors import NotFound
from pykueue.kube import deploy
from pykueue.kube.local_registration import LocalRegistration, accepts_connections, registered_url
from pykueue.store.memory import MemoryStore


@pytest.fixture
def live_url() -> Iterator[str]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield f"https://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def dead_url() -> str:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    return f"https://127.0.0.1:{port}"


def _configuration(url: str) -> dict[str, object]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": deploy.VALIDATING_WEBHOOK},
        "webhooks": [{"name": "vjob.pykueue.io", "clientConfig": {"url": f"{url}/validate-jobs"}}],
    }


async def _put(store: MemoryStore, url: str) -> None:
    """Create or replace the configuration, as `store.apply` does on the API server."""
    try:
        current = await store.get("ValidatingWebhookConfiguration", "", deploy.VALIDATING_WEBHOOK)
    except NotFound:
        await store.create(_configuration(url))
        return
    await store.update({**_configuration(url), "metadata": current["metadata"]})


def _replica(store: MemoryStore, url: str, leading: bool) -> LocalRegistration:
    async def register() -> None:
        await _put(store, url)

    return LocalRegistration(store, url, register, leading=lambda: leading)


def _check(store: MemoryStore, url: str, leading: bool, registered: str | None) -> tuple[bool, str]:
    async def run() -> tuple[bool, str]:
        if registered is not None:
            await _put(store, registered)
        did = await _replica(store, url, leading).check()
        return did, await registered_url(store)

    return asyncio.run(run())


def test_a_standby_leaves_a_live_replica_registered(live_url: str) -> None:
    assert _check(MemoryStore(), "https://10.0.0.2:9443", leading=False, registered=live_url) == (
        False,
        live_url,
    )


def test_a_standby_takes_over_from_a_replica_that_does_not_answer(dead_url: str) -> None:
    mine = "https://10.0.0.2:9443"
    assert _check(MemoryStore(), mine, leading=False, registered=dead_url) == (True, mine)


def test_the_first_replica_registers_itself() -> None:
    mine = "https://10.0.0.2:9443"
    assert _check(MemoryStore(), mine, leading=False, registered=None) == (True, mine)


def test_the_lease_holder_takes_the_registration_from_a_live_standby(live_url: str) -> None:
    mine = "https://10.0.0.3:9443"
    assert _check(MemoryStore(), mine, leading=True, registered=live_url) == (True, mine)


def test_a_replica_already_registered_writes_nothing() -> None:
    mine = "https://10.0.0.3:9443"
    assert _check(MemoryStore(), mine, leading=True, registered=mine) == (False, mine)


def test_the_probe_tells_a_listening_port_from_a_closed_one(live_url: str, dead_url: str) -> None:
    assert asyncio.run(accepts_connections(live_url)) is True
    assert asyncio.run(accepts_connections(dead_url)) is False
