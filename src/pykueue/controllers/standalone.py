"""Standalone mode's controller loop: the Kubernetes manager's loop, over the SQLite store.

`kube_manager.KubeManager` is store-agnostic: one watch per kind, then per
batch of events one pass of admission, queue status and the job reconciler.
Standalone mode runs exactly that loop on its SQLite store, with one change:
the admission controller is `workloads.StandaloneAdmission` (stale watch
echoes dropped, deactivation evicts, explanations for ``describe``). The
local executor then runs what the job reconciler unsuspends.
"""

from __future__ import annotations

from pykueue.controllers.kube_manager import KubeManager
from pykueue.controllers.workloads import StandaloneAdmission


class StandaloneManager(KubeManager):
    """`KubeManager` with the standalone admission controller."""

    admission: StandaloneAdmission

    def __post_init__(self) -> None:
        super().__post_init__()
        self.admission = StandaloneAdmission(self.store, self.config, self.clock)
