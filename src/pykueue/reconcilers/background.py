"""Writes that travel while the controller goes on: started, counted, drained, cancelled.

The queue status writer sends its writes this way in the background, and the
Workload status `write_queue.WriteQueue` runs each of its writes as one of these (the
Kubernetes manager's passes do not wait for round trips). A write that fails is
logged and left: the object still differs from the engine's view, so a later pass
writes it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from pykueue.errors import PykueueError

log = logging.getLogger(__name__)


def count_writes(results: list[int | BaseException]) -> int:
    """The writes made by a batch run together; the first failure once all have ended.

    Every write of a batch finishes (or fails) before the pass goes on, so none is left
    running behind a failed one.
    """
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return sum(r for r in results if isinstance(r, int))


class BackgroundWrites:
    """The background writes of one writer."""

    def __init__(self, what: str) -> None:
        self.what = what  # for the log: "workload status", "queue status"
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, write: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(self._logged(write))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _logged(self, write: Coroutine[Any, Any, Any]) -> None:
        try:
            await write
        except PykueueError as exc:
            log.warning("%s not written: %s", self.what, exc)

    async def drain(self) -> None:
        """Wait for the writes started so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        """Cancel them (shutdown, lost leadership); a restart redoes what they would have."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
