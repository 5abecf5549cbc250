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
concern, and it would add noise to every round trip).

Feature gates: with ``PartialAdmission`` off (it is on by default upstream), the
workload webhook clears every pod set's ``minCount``, and so does `apply_defaults`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pydantic import BaseModel

from pykueue.api.meta import ObjectMeta
from pykueue.api.workload import Workload

DEFAULT_NAMESPACE: Final = "default"

# The gates the API layer consults, at upstream's defaults.
DEFAULT_FEATURE_GATES: Final[Mapping[str, bool]] = {"PartialAdmission": True}

# Kinds whose objects live in a namespace; every other kind we read is cluster-scoped.
NAMESPACED_KINDS: Final = frozenset({"LocalQueue", "Workload", "LimitRange", "Job", "JobSet", "Pod"})


def is_namespaced(kind: str) -> bool:
    return kind in NAMESPACED_KINDS


def gate_enabled(feature_gates: Mapping[str, bool] | None, name: str) -> bool:
    """A feature gate's value, or upstream's default for it (a gate the API layer does not
    consult is a bug in the caller, so it raises rather than read as off)."""
    if name not in DEFAULT_FEATURE_GATES:
        raise KeyError(f"feature gate {name!r} is not one the API layer consults (api/defaults.py)")
    if feature_gates is not None and name in feature_gates:
        return bool(feature_gates[name])
    return DEFAULT_FEATURE_GATES.get(name, False)


def apply_defaults(obj: BaseModel, feature_gates: Mapping[str, bool] | None = None) -> None:
    """Fill in the defaults that depend on the object's kind (in place)."""
    if isinstance(obj, Workload) and not gate_enabled(feature_gates, "PartialAdmission"):
        # Upstream's workload webhook drops minCount when partial admission is off.
        for pod_set in obj.spec.pod_sets:
            pod_set.min_count = None
    kind = getattr(obj, "kind", "")
    metadata = getattr(obj, "metadata", None)
    if not isinstance(metadata, ObjectMeta):
        return
    if is_namespaced(kind):
        if not metadata.namespace:
            metadata.namespace = DEFAULT_NAMESPACE
    else:
        metadata.namespace = ""
