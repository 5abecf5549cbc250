"""WorkloadPriorityClass: a priority for queueing only, independent of pod priority.

Unlike a scheduling.k8s.io PriorityClass (see `pykueue.api.core.PriorityClass`), it
changes the order in which Kueue admits and preempts workloads without changing how
kube-scheduler treats their pods.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.meta import Int32, KubeModel, ObjectMeta


class WorkloadPriorityClass(KubeModel):
    """A named priority for workloads (label kueue.x-k8s.io/priority-class), apart from pods' PriorityClass."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    metadata: ObjectMeta
    value: Int32 = Field(
        description="The priority of the workloads that name this class; higher goes first and may preempt lower."
    )
    description: str = Field(default="", max_length=2048)
