"""The per-tenant token bucket of the standalone API (`pykueue.standalone.http.tenant_limits`)."""

from __future__ import annotations

import pytest

from pykueue.api import access
from pykueue.standalone.http import tenant_limits
from pykueue.standalone.http.limits import Limits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_tenant_gets_its_burst_then_its_rate_and_admins_are_not_limited() -> None:
    clock = Clock()
    rates = tenant_limits.RateLimiter(Limits(requests_per_second=2, burst=3), clock)
    alice = access.Identity(name="alice", role="tenant", namespaces=("research",))
    bob = access.Identity(name="bob", role="tenant", namespaces=("product",))
    for _ in range(3):
        rates.admit(alice)
    with pytest.raises(tenant_limits.TooManyRequests) as refused:
        rates.admit(alice)
    assert refused.value.status == 429 and refused.value.retry_after == 1
    assert "limits.requestsPerSecond (2 per second" in refused.value.message
    rates.admit(bob)  # a bucket of its own
    clock.now += 0.5  # one request's worth at 2 per second
    rates.admit(alice)
    with pytest.raises(tenant_limits.TooManyRequests):
        rates.admit(alice)
    clock.now += 60  # refilled up to the burst, never beyond
    for _ in range(3):
        rates.admit(alice)
    with pytest.raises(tenant_limits.TooManyRequests):
        rates.admit(alice)
    admin = access.Identity(name="root", role="admin")
    for _ in range(100):
        rates.admit(admin)
