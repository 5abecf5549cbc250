"""The decisions standalone mode prints: only those whose Workload still existed to be written."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from pathlib import Path

import yaml

import designs
from pykueue.engine.events import ADMITTED
from pykueue.standalone.admission import StandaloneAdmission
from pykueue.store.base import WatchEvent, resource_version
from pykueue.store.sqlite import SQLiteStore
from pykueue.views import rows

EXAMPLES = Path(__file__).parents[2] / "examples"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_no_admission_is_printed_for_a_workload_deleted_before_its_write(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db", now=lambda: NOW)
        for name in ("queues.yaml", "workloads.yaml"):
            for doc in yaml.safe_load_all((EXAMPLES / name).read_text()):
                if doc:
                    await store.create(doc)
        admission = StandaloneAdmission(store, clock=lambda: NOW)
        await admission.sync()
        # Deleted (by the job reconciler, say) after the engine read it, before it decides:
        # the engine admits it, and its status write finds it gone.
        await store.delete("Workload", "research", "finetune")
        await admission.reconcile()
        engine = {e.workload for e in admission.state.events if e.type == ADMITTED}
        printed = {e.workload for e in admission.decisions if e.type == ADMITTED}
        assert "research/finetune" in engine
        assert printed == engine - {"research/finetune"} and printed
        store.close()

    asyncio.run(scenario())


CHECKED = [
    designs.flavor(),
    designs.admission_check("approval", "example.com/approver"),
    designs.cluster_queue(checks=["approval"]),
    designs.local_queue("team"),
    designs.workload("team", "w"),
]


def test_every_view_says_which_admission_check_a_workload_waits_for(tmp_path: Path) -> None:
    """Issue 44, item 3: an unanswered check is named (not 'Admitted' in one view and
    'Pending' in another), before and after its controller comes up."""

    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.db", now=lambda: NOW)
        for doc in CHECKED:
            await store.create(copy.deepcopy(doc))
        admission = StandaloneAdmission(store, clock=lambda: NOW)
        await admission.sync()
        await admission.reconcile()
        stored = await store.get("Workload", "team", "w")
        explained = admission.explain(stored)
        assert explained.state == "Pending"
        words = [message for _, message in explained.reasons]
        assert any(
            "waiting for admission check approval" in m and "example.com/approver" in m for m in words
        ), words
        assert rows.workload_state(stored) == "Pending"

        # Its controller comes up (Active) but has not decided yet: quota is reserved, the job
        # does not run, and every view says what it waits for.
        check = await store.get("AdmissionCheck", "", "approval")
        check["status"] = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Active",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T12:00:00Z",
                }
            ]
        }
        admission.handle(_modified(await store.update_status(check)))
        await admission.reconcile()
        stored = await store.get("Workload", "team", "w")
        explained = admission.explain(stored)
        assert explained.state == "QuotaReserved" and explained.cluster_queue == "cq"
        assert [m for _, m in explained.reasons] == ["waiting for admission check approval (Pending)"]
        row = rows.workload_row(stored)
        assert row["state"] == "QuotaReserved"
        assert row["reason"] == "waiting for admission check approval (Pending)"
        store.close()

    asyncio.run(scenario())


def _modified(obj: dict[str, object]) -> WatchEvent:
    return WatchEvent("MODIFIED", obj, resource_version(obj))
