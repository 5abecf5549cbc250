"""What the usage ledger costs a standalone store's Workload writes (docs/performance.md).

    python -m benchmarks.ledger_bench

Writes through a real `SQLiteStore` file, with the ledger and with it switched off:
``run`` writes open or close a run (admission, finish, release: each one ledger row in the
same transaction); ``pending`` writes change a waiting workload's explanation (no row). The
figure is the best of five rounds of 500 workloads, microseconds per write.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from pykueue.store.sqlite import SQLiteStore

ROUNDS = 5
WORKLOADS = 500
AT = "2026-12-01T10:00:00Z"
WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"namespace": "team", "ownerReferences": [{"kind": "Job", "name": "j"}]},
    "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1}]},
}
RESERVED = {
    "type": "QuotaReserved",
    "status": "True",
    "reason": "QuotaReserved",
    "message": "",
    "lastTransitionTime": AT,
}
FINISHED = {
    "type": "Finished",
    "status": "True",
    "reason": "Succeeded",
    "message": "",
    "lastTransitionTime": AT,
}
ADMISSION = {
    "clusterQueue": "cq",
    "podSetAssignments": [
        {
            "name": "main",
            "count": 1,
            "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"},
            "resourceUsage": {"cpu": "1", "nvidia.com/gpu": "1"},
        }
    ],
}


def _named(i: int) -> dict[str, Any]:
    return {**WORKLOAD, "metadata": {**WORKLOAD["metadata"], "name": f"w{i}"}}


async def _round(ledger: bool, kind: str) -> float:
    store = SQLiteStore(Path(tempfile.mkdtemp(prefix="ledger-bench-")) / "store.db")
    if not ledger:
        store._record_usage = lambda before, after: None  # type: ignore[method-assign]
    for i in range(WORKLOADS):
        await store.create(_named(i))
    writes = 0
    start = time.perf_counter()
    for i in range(WORKLOADS):
        if kind == "run":
            statuses = [
                {"admission": ADMISSION, "conditions": [RESERVED]},
                {"admission": ADMISSION, "conditions": [RESERVED, FINISHED]},
                {"conditions": [{**RESERVED, "status": "False", "reason": "Pending"}]},
            ]
        else:
            statuses = [
                {"conditions": [{**RESERVED, "status": "False", "reason": "Pending", "message": f"wait {n}"}]}
                for n in range(3)
            ]
        for status in statuses:
            await store.update_status({**_named(i), "status": status})
            writes += 1
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed / writes * 1e6


def main() -> None:
    print(f"ledger bench: best of {ROUNDS} rounds of {WORKLOADS} workloads, µs per Workload write")
    for kind in ("run", "pending"):
        off = min(asyncio.run(_round(False, kind)) for _ in range(ROUNDS))
        on = min(asyncio.run(_round(True, kind)) for _ in range(ROUNDS))
        print(f"  {kind:8} writes: {off:6.0f} without the ledger, {on:6.0f} with it ({on - off:+.0f})")


if __name__ == "__main__":
    main()
