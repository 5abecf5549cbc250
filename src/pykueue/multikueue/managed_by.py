"""Which new jobs are handed to MultiKueue when they are created (upstream's managedBy defaulting).

A user submitting a job to a queue whose ClusterQueue runs its jobs on worker clusters
should not have to know it: the job webhook writes ``kueue.x-k8s.io/multikueue`` into the
job's managed-by field for them, so the manager's own job controller leaves the job alone
and MultiKueue dispatches it. As upstream, that happens when all of these hold:

* the job is being created (most kinds' managed-by field is immutable afterwards);
* its kind can be dispatched (`jobframework.MultiKueueAdapter`) and its managed-by field
  is empty or names the kind's own controller; a third controller's name is left alone;
* it names a LocalQueue with the ``kueue.x-k8s.io/queue-name`` label (after the webhook
  gave it the namespace's default LocalQueue, if it does that);
* that LocalQueue exists, and its ClusterQueue lists an AdmissionCheck whose
  ``controllerName`` is ``kueue.x-k8s.io/multikueue`` (on any flavor; the check need not
  be active yet).

A LocalQueue, ClusterQueue or AdmissionCheck not created yet counts as "no": the job is
created as written (and, without the field, its check is later Rejected).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable

from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.reconcilers import jobframework
from pykueue.store.base import Manifest

ObjectLookup = Callable[[str, str, str], Awaitable[Manifest | None]]
"""``await get(kind, namespace, name)``: a Kueue object as the controller sees it, or None."""


async def queue_uses_multikueue(get: ObjectLookup, namespace: str, local_queue: str) -> bool:
    """Whether the ClusterQueue behind ``namespace/local_queue`` has a MultiKueue admission check."""
    queue = await get("LocalQueue", namespace, local_queue)
    cluster_queue = str(((queue or {}).get("spec") or {}).get("clusterQueue") or "")
    if not cluster_queue:
        return False
    spec = (await get("ClusterQueue", "", cluster_queue) or {}).get("spec") or {}
    rules = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    for name in dict.fromkeys(str(rule.get("name") or "") for rule in rules):
        check = await get("AdmissionCheck", "", name) if name else None
        if ((check or {}).get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
            return True
    return False


async def hand_over(
    adapter: jobframework.MultiKueueAdapter, job: Manifest, namespace: str, get: ObjectLookup
) -> bool:
    """Set ``job``'s managed-by field to MultiKueue (in place) when its queue runs it elsewhere;
    True when the job was changed."""
    queue = jobframework.labels_of(job).get(jobframework.QUEUE_NAME_LABEL)
    if not queue:
        return False
    # Asked on a copy first: a job MultiKueue has already, or another controller's, needs no lookup.
    if not adapter.default_managed_by(copy.deepcopy(job)):
        return False
    if not await queue_uses_multikueue(get, namespace, queue):
        return False
    return adapter.default_managed_by(job)
