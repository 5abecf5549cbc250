"""Metrics, visibility data and memory over the in-memory store: what the controller reports equals the state.

The manager is driven by hand (list, dispatch the objects written, one pass), so
every number is deterministic.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pykueue.engine import pending_causes
from pykueue.reconcilers import metrics
from pykueue.reconcilers.manager import Manager
from pykueue.store.base import Key, WatchEvent, resource_version
from pykueue.store.memory import MemoryStore
from pykueue.views import visibility

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta2"


def _queues(cpu: str = "4") -> list[dict[str, Any]]:
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                    }
                ],
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "team"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def _workload(name: str, priority: int = 0, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "creationTimestamp": "2026-01-01T11:59:50Z"},
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


class Harness:
    def __init__(self) -> None:
        self.now = NOW  # the harness's clock: tests may move it between passes
        self.store = MemoryStore(now=lambda: self.now)
        self.registry = metrics.Metrics()
        self.manager = Manager(self.store, clock=lambda: self.now, on_pass=self.registry.observe_pass)
        self.registry.state = lambda: self.manager.admission.state

    async def start(self, docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            await self.store.create(doc)
        await self.manager.sync()
        await self.step()

    async def step(self) -> None:
        """One pass, then every stored object fed back as the watch would."""
        for _ in range(3):
            await self.manager.reconcile()
            for kind in ("Workload", "ClusterQueue", "LocalQueue"):
                items, _ = await self.store.list(kind)
                for obj in items:
                    self.manager.dispatch(WatchEvent("MODIFIED", obj, resource_version(obj)))

    async def create(self, obj: dict[str, Any]) -> None:
        created = await self.store.create(obj)
        self.manager.dispatch(WatchEvent("ADDED", created, resource_version(created)))

    async def finish(self, name: str) -> None:
        obj = await self.store.get("Workload", "team", name)
        status = dict(obj.get("status") or {})
        status["conditions"] = [
            *status.get("conditions", []),
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "done",
                "lastTransitionTime": "2026-01-01T12:00:00Z",
            },
        ]
        written = await self.store.update_status({**obj, "status": status})
        self.manager.dispatch(WatchEvent("MODIFIED", written, resource_version(written)))

    async def delete(self, name: str) -> None:
        obj = await self.store.get("Workload", "team", name)
        await self.store.delete("Workload", "team", name)
        self.manager.dispatch(WatchEvent("DELETED", obj, resource_version(obj)))

    def scrape(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = generate_latest(self.registry.registry).decode()
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }


def _value(scraped: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted({"replica_role": "standalone", **labels}.items())))
    return scraped[key]


def test_gauges_and_counters_equal_the_objects() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.start([*_queues("4"), *(_workload(f"w{i}") for i in range(6))])
        scraped = h.scrape()
        stored, _ = await h.store.list("Workload")
        admitted = [w for w in stored if (w.get("status") or {}).get("admission")]
        assert len(admitted) == 4
        assert _value(scraped, "kueue_admitted_workloads_total", cluster_queue="cq", priority_class="") == 4
        assert _value(scraped, "kueue_reserving_active_workloads", cluster_queue="cq") == 4
        assert _value(scraped, "kueue_admitted_active_workloads", cluster_queue="cq") == 4
        pending = sum(
            _value(scraped, "kueue_pending_workloads", cluster_queue="cq", status=s)
            for s in ("active", "inadmissible")
        )
        assert pending == 2
        by_cause = {
            cause: _value(scraped, "pykueue_pending_workloads_by_cause", cluster_queue="cq", cause=cause)
            for cause in pending_causes.CAUSES
        }
        # The queue's head was tried and did not fit; its twin behind it waits untried, for the same cause.
        assert by_cause == {
            cause: (2 if cause == pending_causes.QUOTA else 0) for cause in pending_causes.CAUSES
        }
        cq = await h.store.get("ClusterQueue", "", "cq")
        assert cq["status"]["pendingWorkloads"] == 2
        fr = {"cohort": "", "cluster_queue": "cq", "flavor": "default", "resource": "cpu"}
        assert _value(scraped, "kueue_cluster_queue_nominal_quota", **fr) == 4
        assert _value(scraped, "kueue_cluster_queue_resource_usage", **fr) == 4
        assert _value(scraped, "kueue_cluster_queue_status", cluster_queue="cq", status="active") == 1
        assert _value(scraped, "kueue_cluster_queue_status", cluster_queue="cq", status="pending") == 0
        # Waited 10 s from creation to admission.
        wait_sum = _value(
            scraped, "kueue_admission_wait_time_seconds_sum", cluster_queue="cq", priority_class=""
        )
        assert wait_sum == 40.0

    asyncio.run(scenario())


def test_preemption_is_counted_for_both_sides() -> None:
    async def scenario() -> None:
        h = Harness()
        queues = _queues("2")
        queues[1]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await h.start([*queues, _workload("low-a"), _workload("low-b")])
        await h.create(_workload("high", priority=100, cpu="2"))
        await h.step()
        await h.step()
        scraped = h.scrape()
        assert (
            _value(
                scraped,
                "kueue_preempted_workloads_total",
                preempting_cluster_queue="cq",
                reason="InClusterQueue",
            )
            == 2
        )
        assert (
            _value(
                scraped,
                "kueue_evicted_workloads_total",
                cluster_queue="cq",
                reason="Preempted",
                underlying_cause="",
                priority_class="",
            )
            == 2
        )

    asyncio.run(scenario())


def test_the_work_a_preemption_stops_is_counted_per_tenant_and_resource() -> None:
    async def scenario() -> None:
        h = Harness()
        queues = _queues("2")
        queues[1]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await h.start([*queues, _workload("low-a"), _workload("low-b", cpu="500m")])
        h.now = NOW + timedelta(minutes=30)
        await h.create(_workload("high", priority=100, cpu="2"))
        await h.step()
        await h.step()
        lost = _value(
            h.scrape(),
            "pykueue_preempted_resource_seconds_total",
            cluster_queue="cq",
            namespace="team",
            flavor="default",
            resource="cpu",
        )
        # 1 CPU and 0.5 CPU, each stopped after 30 minutes of its run.
        assert lost == pytest.approx(1.5 * 1800)

    asyncio.run(scenario())


def test_a_preemption_of_an_admission_never_written_is_not_counted() -> None:
    async def scenario() -> None:
        h = Harness()
        h.registry.unseen_preemption = lambda key: key in h.manager.admission.unseen_preemptions
        queues = _queues("2")
        queues[1]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await h.start([*queues, _workload("low-a"), _workload("low-b")])
        # As if low-a's admission were still waiting for its write: the cache (what the
        # controller last saw stored) holds no reservation for it.
        key = Key("Workload", "team", "low-a")
        cached = h.manager.admission.cache[key]
        h.manager.admission.cache[key] = {**cached, "status": {}}
        await h.create(_workload("high", priority=100, cpu="2"))
        await h.manager.reconcile()
        scraped = h.scrape()
        preempted = _value(
            scraped, "kueue_preempted_workloads_total", preempting_cluster_queue="cq", reason="InClusterQueue"
        )
        assert preempted == 1  # low-b's, whose admission the API had shown

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("kind", "namespace", "name", "change", "reason"),
    [
        ("ClusterQueue", "", "cq", {"stopPolicy": "HoldAndDrain"}, "ClusterQueueStopped"),
        ("LocalQueue", "team", "lq", {"stopPolicy": "HoldAndDrain"}, "LocalQueueStopped"),
        ("Workload", "team", "w0", {"active": False}, "Deactivated"),
    ],
)
def test_every_eviction_is_counted_with_its_reason(
    kind: str, namespace: str, name: str, change: dict[str, Any], reason: str
) -> None:
    async def scenario() -> None:
        h = Harness()
        await h.start([*_queues("2"), _workload("w0"), _workload("w1")])
        obj = await h.store.get(kind, namespace, name)
        written = await h.store.update({**obj, "spec": {**obj["spec"], **change}})
        h.manager.dispatch(WatchEvent("MODIFIED", written, resource_version(written)))
        await h.step()
        await h.step()  # later passes and watch echoes must not count it again
        evicted = 1 if kind == "Workload" else 2
        stored, _ = await h.store.list("Workload")
        reasons = [
            c["reason"]
            for w in stored
            for c in (w.get("status") or {}).get("conditions", [])
            if c["type"] == "Evicted" and c["status"] == "True"
        ]
        assert reasons == [reason] * evicted
        scraped = h.scrape()
        labels = {"cluster_queue": "cq", "underlying_cause": "", "priority_class": ""}
        assert _value(scraped, "kueue_evicted_workloads_total", reason=reason, **labels) == evicted
        # No other reason, and no preemption, was counted.
        counted = {
            dict(key)["reason"]: value
            for (metric, key), value in scraped.items()
            if metric == "kueue_evicted_workloads_total"
        }
        assert counted == {reason: evicted}
        assert not [m for m, _ in scraped if m == "kueue_preempted_workloads_total"]

    asyncio.run(scenario())


def test_visibility_positions_follow_priority_then_creation() -> None:
    async def scenario() -> None:
        h = Harness()
        docs = [
            *_queues("1"),
            _workload("first", priority=10),
            _workload("a"),
            _workload("b", priority=5),
            _workload("c"),
        ]
        docs[-2]["metadata"]["creationTimestamp"] = "2026-01-01T11:59:51Z"
        docs[-1]["metadata"]["creationTimestamp"] = "2026-01-01T11:59:52Z"
        await h.start(docs)
        state = h.manager.admission.state
        summary = visibility.cluster_queue_summary(state, "cq")
        assert summary is not None
        assert summary["kind"] == "PendingWorkloadsSummary"
        rows = [
            (i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in summary["items"]
        ]
        assert rows == [("b", 0, 0), ("a", 1, 1), ("c", 2, 2)]
        assert summary["items"][0]["priority"] == 5 and summary["items"][0]["localQueueName"] == "lq"
        local = visibility.local_queue_summary(state, "team", "lq", offset=1, limit=1)
        assert local is not None and [i["metadata"]["name"] for i in local["items"]] == ["a"]
        assert visibility.cluster_queue_summary(state, "nope") is None
        assert visibility.local_queue_summary(state, "other", "lq") is None

    asyncio.run(scenario())


def test_many_create_finish_cycles_do_not_grow_the_engine() -> None:
    """A day of churn in miniature: every dict the engine and the caches keep stays bounded."""

    async def scenario() -> None:
        h = Harness()
        await h.start(_queues("5"))

        def sizes() -> dict[str, int]:
            state = h.manager.admission.state
            return {
                "workloads": len(state.workloads),
                "finished": len(state.finished),
                "events": len(state.events),
                "admitted": sum(len(v) for v in state.admitted.values()),
                "cache": len(h.manager.admission.cache),
                "settled": len(h.manager.admission.settled),
                "queue": sum(len(q) for q in state.queues.values()),
            }

        samples = []
        for round_ in range(40):
            names = [f"r{round_}-{i}" for i in range(5)]
            for name in names:
                await h.create(_workload(name))
            await h.step()
            for name in names:
                await h.finish(name)
            await h.step()
            for name in names:
                await h.delete(name)
            await h.step()
            samples.append(sizes())
        assert samples[-1] == samples[9], (samples[9], samples[-1])
        assert samples[-1]["workloads"] == 0 and samples[-1]["events"] == 0
        assert (
            _value(h.scrape(), "kueue_admitted_workloads_total", cluster_queue="cq", priority_class="") == 200
        )

    asyncio.run(scenario())


def test_a_reservation_waiting_for_checks_is_counted_as_reserved_then_admitted() -> None:
    check = {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/check"},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": ""}]},
    }

    async def scenario() -> None:
        h = Harness()
        queues = _queues()
        queues[1]["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
        await h.start([check, *queues, _workload("w0")])
        scraped = h.scrape()
        labels = {"cluster_queue": "cq", "priority_class": ""}
        assert _value(scraped, "kueue_quota_reserved_workloads_total", **labels) == 1
        assert not [m for m, _ in scraped if m == "kueue_admitted_workloads_total"]

        # The check's controller says Ready: the workload is admitted, counted once.
        obj = await h.store.get("Workload", "team", "w0")
        states = obj["status"]["admissionChecks"]
        assert [s["state"] for s in states] == ["Pending"]
        states[0] = {**states[0], "state": "Ready", "lastTransitionTime": "2026-01-01T12:00:00Z"}
        written = await h.store.update_status(obj)
        h.manager.dispatch(WatchEvent("MODIFIED", written, resource_version(written)))
        await h.step()
        await h.step()
        scraped = h.scrape()
        assert _value(scraped, "kueue_quota_reserved_workloads_total", **labels) == 1
        assert _value(scraped, "kueue_admitted_workloads_total", **labels) == 1
        assert _value(scraped, "kueue_admission_checks_wait_time_seconds_count", **labels) == 1
        assert _value(scraped, "kueue_quota_reserved_wait_time_seconds_count", **labels) == 1

    asyncio.run(scenario())
