"""Two MultiKueueClusters naming the same worker (as while a worker is renamed): its copies stay.

A copy is deleted only when its manager Workload is gone, or wants it no more through a worker
of its own MultiKueueConfig (finished, evicted, assigned to another worker), as upstream; the
name a poll reaches a worker by does not make its running copy a loser's.
"""

from __future__ import annotations

import asyncio

import pytest

from pykueue.store.base import Manifest

from .test_multikueue_refusals import NS, Worker, _poll, _sent, _with_copy


def _held(worker: Worker) -> list[tuple[str, str]]:
    async def run() -> list[tuple[str, str]]:
        found = []
        for kind in ("Job", "Workload"):
            items, _ = await worker.store.list(kind, NS)
            found += [(kind, str(i["metadata"]["name"])) for i in items]
        return sorted(found)

    return asyncio.run(run())


@pytest.mark.parametrize("config", [("w1",), ("w1", "w1-renamed"), ("w1-renamed", "w1")])
def test_the_copy_the_elected_worker_runs_stays_whatever_name_reaches_it(config: tuple[str, ...]) -> None:
    # w1 won (the manager's clusterName) and runs the job; w1-renamed reaches the same API server.
    worker = _with_copy(_sent(None))
    entry, events = _poll(worker, {"w1": worker, "w1-renamed": worker}, config)
    assert entry["state"] == "Ready"
    assert _held(worker) == [("Job", "j"), ("Workload", "job-j")]
    assert events == []


def test_a_losers_copy_on_another_worker_of_the_config_still_goes() -> None:
    winner, loser = _with_copy(_sent(None)), _with_copy(_sent(None), cluster="w2")
    entry, _ = _poll(winner, {"w1": winner, "w2": loser}, ("w1", "w2"))
    assert entry["state"] == "Ready"
    assert _held(winner) == [("Job", "j"), ("Workload", "job-j")]
    assert _held(loser) == []


def test_an_orphan_goes_whatever_name_reaches_it() -> None:
    worker = _with_copy(_sent(None))
    orphan: Manifest = _sent(None)
    orphan["metadata"] = {**orphan["metadata"], "name": "gone"}
    orphan["metadata"]["annotations"] = {"kueue.x-k8s.io/multikueue-workload": "gone"}
    asyncio.run(worker.store.create(orphan))
    _poll(worker, {"w1": worker, "other": worker}, ("w1",))
    assert _held(worker) == [("Job", "j"), ("Workload", "job-j")]
