"""Estimated start times from a live admission controller: learned from finished Workloads."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from pykueue.engine import runtimes
from pykueue.reconcilers import estimating
from pykueue.reconcilers.admission import AdmissionController
from pykueue.store.memory import MemoryStore
from pykueue.views import visibility

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
QUEUES: list[dict[str, Any]] = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "2"}]}],
                }
            ],
        },
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": "team"},
        "spec": {"clusterQueue": "cq"},
    },
]


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _workload(name: str, created: datetime, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "creationTimestamp": _time(created)},
        "spec": {
            "queueName": "main",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
                    },
                }
            ],
            **spec,
        },
    }


def _finished(name: str, started: datetime, minutes: int) -> dict[str, Any]:
    obj = _workload(name, started)
    obj["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": _time(started),
            },
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "",
                "lastTransitionTime": _time(started + timedelta(minutes=minutes)),
            },
        ]
    }
    return obj


async def _controller(*workloads: dict[str, Any]) -> AdmissionController:
    store = MemoryStore(now=lambda: NOW)
    for doc in [*QUEUES, *workloads]:
        created = await store.create(doc)
        if "status" in doc:
            await store.update_status({**created, "status": doc["status"]})
    controller = AdmissionController(store, clock=lambda: NOW)
    await controller.sync()
    await controller.reconcile()
    return controller


def _at(estimate: dict[str, str] | None) -> tuple[str, str, str, str]:
    assert estimate is not None
    return estimate["at"], estimate["low"], estimate["high"], estimate["basis"]


def test_pending_workloads_get_estimates_from_learned_runtimes() -> None:
    async def scenario() -> None:
        earlier = NOW - timedelta(hours=2)
        controller = await _controller(
            _finished("done-1", earlier, 10),
            _finished("done-2", earlier, 20),
            _finished("done-3", earlier, 30),
            _workload("running", NOW - timedelta(minutes=5)),
            _workload("next", NOW - timedelta(minutes=4)),
            _workload("last", NOW - timedelta(minutes=3)),
        )
        estimates = estimating.StartEstimates(controller)
        await estimates.refresh()
        # "running" was just admitted: it runs the learned 20 min (10 to 30 min in the range),
        # "next" follows it, "last" follows "next".
        assert _at(estimates.estimated_start("team/next")) == (
            "2026-01-01T12:20:00Z",
            "2026-01-01T12:10:00Z",
            "2026-01-01T12:30:00Z",
            "learned p50 of 3 finished in team/main",
        )
        assert _at(estimates.estimated_start("team/last"))[:3] == (
            "2026-01-01T12:40:00Z",
            "2026-01-01T12:20:00Z",
            "2026-01-01T13:00:00Z",
        )
        assert estimates.estimated_start("team/running") is None  # admitted: no estimate
        await estimates.refresh()
        assert list(estimates.model.samples["team/main"]) == [600_000_000, 1_200_000_000, 1_800_000_000]

    asyncio.run(scenario())


def test_a_declared_limit_is_used_for_the_workload_that_declares_it() -> None:
    async def scenario() -> None:
        controller = await _controller(
            _workload("running", NOW - timedelta(minutes=5), maximumExecutionTimeSeconds=600),
            _workload("next", NOW - timedelta(minutes=4)),
        )
        estimates = estimating.StartEstimates(controller)
        await estimates.refresh()
        # Nothing learned, but "running" ends by its limit at the latest, and that decides
        # when "next" starts: any time from now to the limit, half of it expected.
        assert _at(estimates.estimated_start("team/next")) == (
            "2026-01-01T12:05:00Z",
            "2026-01-01T12:00:00Z",
            "2026-01-01T12:10:00Z",
            "maximumExecutionTimeSeconds as an upper bound (nothing finished yet)",
        )

    asyncio.run(scenario())


def test_refreshes_wait_longer_when_a_refresh_is_slow() -> None:
    async def scenario() -> None:
        controller = await _controller()
        estimates = estimating.StartEstimates(controller, interval_seconds=10, load_factor=3)
        estimates.last_seconds = 1.0
        assert estimates.next_wait() == 10
        estimates.last_seconds = 7.0
        assert estimates.next_wait() == 21

    asyncio.run(scenario())


def test_visibility_items_carry_the_estimate() -> None:
    async def scenario() -> None:
        controller = await _controller(
            _workload("running", NOW - timedelta(minutes=5), maximumExecutionTimeSeconds=600),
            _workload("next", NOW - timedelta(minutes=4)),
        )
        estimates = estimating.StartEstimates(controller)
        summary = visibility.cluster_queue_summary(
            controller.state, "cq", estimated=estimates.estimated_start
        )
        assert summary is not None and "estimatedStart" not in summary["items"][0]  # not computed yet
        await estimates.refresh()
        summary = visibility.cluster_queue_summary(
            controller.state, "cq", estimated=estimates.estimated_start
        )
        assert summary is not None
        assert [(i["metadata"]["name"], i["estimatedStart"]["at"]) for i in summary["items"]] == [
            ("next", "2026-01-01T12:05:00Z")
        ]

    asyncio.run(scenario())


def test_a_refresh_plays_within_its_cycle_budget() -> None:
    async def scenario() -> None:
        # Six pending, each waiting for the one before: a whole forward run takes more cycles
        # than the budget given, so only the soonest get an estimate.
        controller = await _controller(
            _workload("running", NOW - timedelta(minutes=10), maximumExecutionTimeSeconds=600),
            *(_workload(f"p{i}", NOW - timedelta(minutes=9 - i)) for i in range(6)),
        )
        unbounded = estimating.StartEstimates(controller, budget_seconds=0)
        await unbounded.refresh()
        assert unbounded.max_cycles() is None and len(unbounded.estimates) == 6
        bounded = estimating.StartEstimates(controller, first_max_cycles=3)
        assert bounded.max_cycles() == 3
        await bounded.refresh()
        assert 0 < len(bounded.estimates) < 6
        assert all(unbounded.estimates[key] == found for key, found in bounded.estimates.items())
        # The next budget comes from what the cycles cost (at least 20 cycles).
        assert bounded.cycles_per_second > 0
        bounded.cycles_per_second = 30_000.0
        assert bounded.max_cycles() == 9_000  # a fifth of 1.5 s at 30,000 cycles a second
        bounded.cycles_per_second = 10.0
        assert bounded.max_cycles() == estimating.MIN_CYCLES

    asyncio.run(scenario())


def test_a_start_that_waits_for_an_unknown_end_is_unknown() -> None:
    """A fresh server (issue 44, item 1): nothing finished, no limit declared. The start is
    unknown, said so with its reason, rather than an hour made up."""

    async def scenario() -> None:
        controller = await _controller(
            _workload("running", NOW - timedelta(minutes=5)),
            _workload("next", NOW - timedelta(minutes=4)),
        )
        estimates = estimating.StartEstimates(controller)
        await estimates.refresh()
        shown = estimates.estimated_start("team/next")
        assert shown is not None
        assert (shown["at"], shown["low"], shown["high"]) == (None, None, None)
        assert shown["basis"] == runtimes.UNKNOWN_BASIS

    asyncio.run(scenario())
