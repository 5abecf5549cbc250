"""One vocabulary for why a job waits (issue 44, item 2): describe, submit, get and the
dashboard give the same cause word and sentence, from `views.why`."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import designs
from pykueue.engine import pending_causes
from pykueue.standalone.admission import StandaloneAdmission
from pykueue.store.sqlite import SQLiteStore
from pykueue.views import dashboard_data

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

QUEUES = [
    designs.flavor(),
    designs.cluster_queue(namespace_labels={"team": "ml"}, strategy="StrictFIFO"),
    designs.namespace("ml", {"team": "ml"}),
    designs.namespace("other"),
    designs.local_queue("ml"),
    designs.local_queue("other"),
]


def test_describe_and_the_dashboard_give_the_same_cause_and_words(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        store = SQLiteStore(tmp_path / "s.db", now=lambda: NOW)
        for doc in QUEUES:
            await store.create(copy.deepcopy(doc))
        # running takes 3 of 4 cpu; too-big asks more than the queue has; waiting fits once
        # running ends; outsider's namespace is not selected by the ClusterQueue.
        await store.create(designs.workload("ml", "running", "3", created="2026-01-01T11:00:00Z"))
        await store.create(designs.workload("ml", "too-big", "64", created="2026-01-01T11:01:00Z"))
        await store.create(designs.workload("ml", "waiting", "2", created="2026-01-01T11:02:00Z"))
        await store.create(designs.workload("other", "outsider", "1", created="2026-01-01T11:03:00Z"))
        admission = StandaloneAdmission(store, clock=lambda: NOW)
        await admission.sync()
        await admission.reconcile()
        described: dict[str, Any] = {}
        rows: dict[str, Any] = {}
        for key in ("ml/too-big", "ml/waiting", "other/outsider"):
            namespace, name = key.split("/")
            stored = await store.get("Workload", namespace, name)
            described[key] = admission.explain(stored).as_dict()
            rows[key] = dashboard_data.workload_row(admission.state, stored, {})
        store.close()
        return described, rows

    described, rows = asyncio.run(scenario())
    assert described["ml/too-big"]["reasons"][0]["category"] == pending_causes.CAPACITY
    assert described["ml/too-big"]["reasons"][0]["message"].startswith("can never fit as requested")
    assert described["other/outsider"]["reasons"][0]["category"] == pending_causes.POLICY
    for key, explanation in described.items():
        # Every waiting row says why, in the words describe uses, under the same cause.
        assert explanation["state"] == "Pending", (key, explanation)
        words = "; ".join(r["message"] for r in explanation["reasons"])
        assert rows[key]["reason"] == words and words, (key, rows[key], explanation)
        assert explanation["cause"] == rows[key]["cause"]
        assert explanation["cause"] in {r["category"] for r in explanation["reasons"]}, (key, explanation)
