"""A job naming a pre-built Workload (``kueue.x-k8s.io/prebuilt-workload-name``) is queued by it.

Upstream's rules, on the in-memory store (tests/kube/controller runs the same reconciler on the
API server): the job never gets a Workload of its own, it is held until the named Workload
exists, it then controls that Workload, and a Workload that does not describe it is finished
OutOfSync. Without this, a worker of upstream's MultiKueue (which pre-builds the Workload of
every job copy it sends) would queue each copy twice and hold its quota twice.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.integrations.batch_job import BatchJobAdapter
from pykueue.reconcilers.job_reconciler import JobReconciler
from pykueue.store.base import Manifest, WatchEvent
from pykueue.store.memory import MemoryStore

from .test_jobframework import QUEUED, job

PREBUILT = jobframework.PREBUILT_WORKLOAD_KEY


def prebuilt_job(name: str = "copy", workload: str = "made-before", **extra: Any) -> Manifest:
    return job(name, labels={**QUEUED, PREBUILT: workload}, **extra)


def workload_for(the_job: Manifest, name: str = "made-before", owner: Manifest | None = None) -> Manifest:
    """The Workload another party built for ``the_job`` (as MultiKueue's manager does): no owner yet."""
    made = jobframework.workload_for(
        BatchJobAdapter(), {**the_job, "metadata": {**the_job["metadata"], "uid": "x"}}
    )
    made["metadata"] = {"name": name, "namespace": the_job["metadata"]["namespace"]}
    if owner is not None:
        made["metadata"]["ownerReferences"] = [owner]
    return made


class Harness:
    def __init__(self) -> None:
        self.store = MemoryStore()
        self.events: list[tuple[str, str, str]] = []
        self.reconciler = JobReconciler(
            self.store,
            integrations.registry(),
            dict,
            on_event=lambda obj, kind, reason, message: self.events.append(
                (obj["metadata"]["name"], reason, message)
            ),
        )

    async def start(self, *objs: Manifest) -> None:
        for obj in objs:
            await self.store.create(obj)
        await self.reconciler.sync()
        await self.settle()

    async def settle(self) -> None:
        """Passes until nothing is written (what the watch events of each write would bring)."""
        for _ in range(10):
            self.reconciler.dirty.update(self.reconciler.jobs)
            if not await self.reconciler.reconcile():
                return
        raise AssertionError("the reconciler still writes after 10 passes")

    async def arrive(self, obj: Manifest) -> None:
        """``obj`` created, its watch event handled, one pass."""
        created = await self.store.create(obj)
        self.reconciler.handle(WatchEvent("ADDED", created, str(created["metadata"]["resourceVersion"])))
        await self.settle()

    async def workloads(self) -> list[Manifest]:
        return (await self.store.list("Workload"))[0]

    async def job(self, name: str = "copy") -> Manifest:
        return await self.store.get("Job", "team-a", name)


def test_the_job_waits_held_for_its_workload_then_controls_it_and_no_other_is_made() -> None:
    async def scenario() -> tuple[list[Manifest], list[Manifest], Manifest]:
        harness = Harness()
        await harness.start(prebuilt_job())
        before = await harness.workloads()
        await harness.arrive(workload_for(prebuilt_job()))
        return before, await harness.workloads(), await harness.job()

    before, after, the_job = asyncio.run(scenario())
    assert before == [], "no Workload of its own while the pre-built one is missing"
    assert the_job["spec"]["suspend"] is True
    assert [w["metadata"]["name"] for w in after] == ["made-before"]
    meta = after[0]["metadata"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "copy",
            "uid": the_job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"][jobframework.JOB_UID_LABEL] == the_job["metadata"]["uid"]
    assert "Finished" not in {c["type"] for c in (after[0].get("status") or {}).get("conditions") or []}


def test_a_running_job_whose_workload_is_missing_is_stopped() -> None:
    async def scenario() -> tuple[Manifest, list[Manifest]]:
        harness = Harness()
        await harness.start(prebuilt_job(suspend=False))
        return await harness.job(), await harness.workloads()

    harness_job, workloads = asyncio.run(scenario())
    assert harness_job["spec"]["suspend"] is True
    assert workloads == []


def test_the_annotation_names_it_as_well_and_wins_over_the_label() -> None:
    named = job("copy", labels={**QUEUED, PREBUILT: "by-label"}, annotations={PREBUILT: "by-annotation"})
    assert jobframework.prebuilt_workload_name(named) == "by-annotation"

    async def scenario() -> list[Manifest]:
        harness = Harness()
        await harness.start(named, workload_for(named, "by-label"), workload_for(named, "by-annotation"))
        return await harness.workloads()

    owned = {
        w["metadata"]["name"]: bool(w["metadata"].get("ownerReferences")) for w in asyncio.run(scenario())
    }
    assert owned == {"by-annotation": True, "by-label": False}


def test_a_workload_another_object_controls_is_left_alone_and_the_job_held() -> None:
    async def scenario() -> tuple[Manifest, list[Manifest], Manifest]:
        harness = Harness()
        other = await harness.store.create(job("other"))  # not queued: no Workload of its own
        ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "other", "uid": other["metadata"]["uid"]}
        ref["controller"] = True
        await harness.start(prebuilt_job(suspend=False), workload_for(prebuilt_job(), owner=ref))
        return await harness.job(), await harness.workloads(), ref

    the_job, workloads, ref = asyncio.run(scenario())
    assert the_job["spec"]["suspend"] is True
    assert [w["metadata"]["ownerReferences"] for w in workloads] == [[ref]]


def test_a_workload_that_does_not_describe_the_job_is_finished_out_of_sync() -> None:
    bigger = copy.deepcopy(prebuilt_job())
    bigger["spec"]["parallelism"] = 5

    async def scenario() -> tuple[Manifest, list[Manifest]]:
        harness = Harness()
        await harness.start(prebuilt_job(), workload_for(bigger))
        return await harness.job(), await harness.workloads()

    the_job, workloads = asyncio.run(scenario())
    assert the_job["spec"]["suspend"] is True
    assert len(workloads) == 1
    finished = [c for c in workloads[0]["status"]["conditions"] if c["type"] == "Finished"]
    assert [(c["status"], c["reason"], c["message"]) for c in finished] == [
        ("True", "OutOfSync", "The prebuilt workload is out of sync with its user job")
    ]


@pytest.mark.parametrize("written", [1, "1", "1000m", 1.0])
def test_the_same_requests_written_another_way_describe_the_job(written: object) -> None:
    # A JobSet's `cpu: 1` (unquoted, as upstream's sample) reached a worker as the int 1 while the
    # Workload the manager sent said "1": compared as text, every such copy was finished OutOfSync.
    spelled = copy.deepcopy(prebuilt_job())
    spelled["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = written

    async def scenario() -> list[Manifest]:
        harness = Harness()
        await harness.start(spelled, workload_for(prebuilt_job()))
        return await harness.workloads()

    (workload,) = asyncio.run(scenario())
    assert "Finished" not in {c["type"] for c in (workload.get("status") or {}).get("conditions") or []}
    assert workload["metadata"]["ownerReferences"][0]["name"] == "copy"


def test_requests_of_another_value_are_still_out_of_sync() -> None:
    more = copy.deepcopy(prebuilt_job())
    more["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1.5

    async def scenario() -> list[Manifest]:
        harness = Harness()
        await harness.start(more, workload_for(prebuilt_job()))
        return await harness.workloads()

    (workload,) = asyncio.run(scenario())
    assert [c["reason"] for c in workload["status"]["conditions"] if c["type"] == "Finished"] == ["OutOfSync"]


def test_a_time_limit_that_differs_is_out_of_sync_too() -> None:
    limited = job("copy", labels={**QUEUED, PREBUILT: "made-before", jobframework.MAX_EXEC_TIME_LABEL: "60"})

    async def scenario() -> list[Manifest]:
        harness = Harness()
        await harness.start(limited, workload_for(prebuilt_job()))
        return await harness.workloads()

    (workload,) = asyncio.run(scenario())
    assert [c["reason"] for c in workload["status"]["conditions"] if c["type"] == "Finished"] == ["OutOfSync"]


def test_a_deleted_job_takes_its_adopted_workload_with_it() -> None:
    async def scenario() -> list[Manifest]:
        harness = Harness()
        await harness.start(prebuilt_job(), workload_for(prebuilt_job()))
        gone = await harness.job()
        await harness.store.delete("Job", "team-a", "copy")
        harness.reconciler.handle(WatchEvent("DELETED", gone, "0"))
        await harness.settle()
        return await harness.workloads()

    assert asyncio.run(scenario()) == []
