"""Defaulting that is not a plain field default.

Most of upstream's defaults are kubebuilder ``+default`` markers on single fields, and
live on the models as field defaults (see `cluster_queue`, `workload`, ...), so a model
built in code is defaulted exactly like one read from a manifest. What remains here
depends on the whole object:

* a namespaced object without a namespace goes to ``default``, as kubectl does; a
  cluster-scoped object loses any namespace it was given, as the API server does;
* ``metadata.creationTimestamp`` stays absent when not given: the engine reads that
  as the zero time (see the scenario format).

Left out on purpose: the ``kueue.x-k8s.io/resource-in-use`` finalizer that upstream's
webhooks add to ClusterQueues and ResourceFlavors (deletion protection is the store's
concern, and it would add noise to every round trip), and clearing ``minCount`` when
the PartialAdmission feature gate is off (it is on by default upstream).
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel

from pykueue.api.meta import ObjectMeta

DEFAULT_NAMESPACE: Final = "default"

# Kinds whose objects live in a namespace; every other kind we read is cluster-scoped.
NAMESPACED_KINDS: Final = frozenset({"LocalQueue", "Workload", "LimitRange", "Job"})


def is_namespaced(kind: str) -> bool:
    return kind in NAMESPACED_KINDS


def apply_defaults(obj: BaseModel) -> None:
    """Fill in the defaults that depend on the object's kind (in place)."""
    kind = getattr(obj, "kind", "")
    metadata = getattr(obj, "metadata", None)
    if not isinstance(metadata, ObjectMeta):
        return
    if is_namespaced(kind):
        if not metadata.namespace:
            metadata.namespace = DEFAULT_NAMESPACE
    else:
        metadata.namespace = ""
