"""Standalone mode's controller loop: the Kubernetes manager's loop, over the SQLite store.

`kube_manager.KubeManager` is store-agnostic: one watch per kind, then per
batch of events one pass of admission, queue status and the job reconciler.
Standalone mode runs exactly that loop on its SQLite store, with one change:
the admission controller is `workloads.StandaloneAdmission` (stale watch
echoes dropped, deactivation evicts, explanations for ``describe``). The
local executor then runs what the job reconciler unsuspends.
"""

from __future__ import annotations

import asyncio
import time

from pykueue.controllers.kube_manager import KubeManager
from pykueue.controllers.workloads import StandaloneAdmission

STATUS_SECONDS = 1.0
MIN_PASS_SECONDS = 0.05


class StandaloneManager(KubeManager):
    """`KubeManager` with the standalone admission controller and throttled queue status."""

    admission: StandaloneAdmission
    status_interval: float = STATUS_SECONDS
    min_pass_interval: float = MIN_PASS_SECONDS
    _next_status: float = 0.0
    _last_pass: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.admission = StandaloneAdmission(self.store, self.config, self.clock)
        # Its own pass floor and status interval (below) govern; writes stay inline.
        self.min_pass_seconds = 0.0
        self.statuses.min_interval_seconds = 0.0
        self.pipeline_writes = False

    async def reconcile(self) -> int:
        """As `KubeManager.reconcile`, but queue status is written at most once a `status_interval`.

        Passes come many per second while jobs churn; the API reads queue usage
        from the live engine, so the stored status may lag by a second.
        """
        wait = self._last_pass + self.min_pass_interval - time.monotonic()
        if wait > 0:
            # Let a burst of events (a thousand jobs finishing) gather into one pass.
            await asyncio.sleep(wait)
        self._last_pass = time.monotonic()
        self.passes += 1
        writes = await self.admission.reconcile()
        now = time.monotonic()
        if now >= self._next_status:
            writes += await self.statuses.write(self.admission.state, self.admission.cache)
            self._next_status = now + self.status_interval
        writes += await self.jobs.reconcile()
        return writes
