"""Standalone mode's controller loop: the Kubernetes manager's loop, over the SQLite store.

`pykueue.reconcilers.manager.Manager` is store-agnostic: one watch per kind, then per
batch of events one pass of admission, queue status and the job reconciler.
Standalone mode runs exactly that loop on its SQLite store, with one change:
the admission controller is `standalone.admission.StandaloneAdmission` (stale watch
echoes dropped, deactivation evicts, explanations for ``describe``). The
local executor then runs what the job reconciler unsuspends.

A standalone server can also be a MultiKueue manager: its MultiKueue check
dispatches to other standalone servers (`pykueue.multikueue.standalone_workers`), and the
executor leaves the jobs handed to MultiKueue alone.
"""

from __future__ import annotations

from pykueue.reconcilers.manager import Manager
from pykueue.standalone.admission import StandaloneAdmission

STATUS_SECONDS = 1.0
MIN_PASS_SECONDS = 0.05


class StandaloneManager(Manager):
    """`Manager` with the standalone admission controller, inline writes and its own pace."""

    admission: StandaloneAdmission

    def admission_controller(self) -> StandaloneAdmission:
        return StandaloneAdmission(self.store, self.config, self.clock)

    def topology_ungater(self) -> None:
        return None  # local processes have no pods to gate, nor nodes to follow

    def __post_init__(self) -> None:
        super().__post_init__()
        # A burst of events (a thousand jobs finishing) gathers into one pass; a queue's
        # status is written at most once a second (the API reads queue usage from the
        # live engine, so the stored status may lag by a second). Writes to the local
        # SQLite file stay inline.
        self.min_pass_seconds = MIN_PASS_SECONDS
        self.statuses.min_interval_seconds = STATUS_SECONDS
        self.pipeline_writes = False
        # No autoscaler answers ProvisioningRequests on a standalone machine.
        self.provisioning_checks = False

    async def reconcile(self) -> int:
        """As `Manager.reconcile`, but the engine's decisions stay for the console to read."""
        self.passes += 1
        writes = await self.admission.reconcile()
        writes += await self.statuses.write(self.admission.state, self.admission.cache)
        writes += await self.jobs.reconcile()
        if self.retainer is not None:
            writes += await self.retainer.reconcile()
        return writes
