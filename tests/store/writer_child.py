"""A child process that writes into a SQLite store; the tests kill it or race with it.

python writer_child.py DB MODE [ARGS]

hold-transaction N READY   create N objects in one transaction, touch READY, then wait forever
update NAME RV VALUE       update LocalQueue team-a/NAME from resourceVersion RV; print "ok" or "conflict"
watch SINCE COUNT          print the names of COUNT LocalQueue watch events after SINCE
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pykueue.errors import Conflict
from pykueue.store.sqlite import SQLiteStore


async def main(argv: list[str]) -> None:
    store = SQLiteStore(argv[0], poll_seconds=0.01)
    mode = argv[1]
    if mode == "hold-transaction":
        count, ready = int(argv[2]), Path(argv[3])
        async with store.transaction():
            for i in range(count):
                await store.create(
                    {"kind": "LocalQueue", "metadata": {"name": f"tx-{i}", "namespace": "team-a"}, "spec": {}}
                )
            ready.write_text("ready")
            await asyncio.sleep(3600)
    elif mode == "update":
        obj = await store.get("LocalQueue", "team-a", argv[2])
        obj["metadata"]["resourceVersion"] = argv[3]
        obj["spec"] = {"clusterQueue": argv[4]}
        try:
            await store.update(obj)
            print("ok", flush=True)
        except Conflict:
            print("conflict", flush=True)
    elif mode == "watch":
        count = int(argv[3])
        print("watching", flush=True)
        async for event in store.watch("LocalQueue", argv[2]):
            print(event.type, event.object["metadata"]["name"], flush=True)
            count -= 1
            if count == 0:
                break


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
