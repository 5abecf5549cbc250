"""The decisions standalone mode prints: only those whose Workload still existed to be written."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import yaml

from pykueue.controllers.workloads import StandaloneAdmission
from pykueue.engine.events import ADMITTED
from pykueue.store.sqlite import SQLiteStore

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
