"""Topology: the ordered node labels (block, rack, host...) that describe a data centre.

Levels go from the widest domain to the narrowest; ``kubernetes.io/hostname`` may only
be the last one. Topology-aware scheduling packs a pod set into as few domains of a
level as it can.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.meta import KubeModel, ObjectMeta

HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_LEVELS = 16
_NODE_LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


class TopologyLevel(KubeModel):
    node_label: str = Field(min_length=1, max_length=316, pattern=_NODE_LABEL_KEY)


class TopologySpec(KubeModel):
    levels: list[TopologyLevel] = Field(min_length=1, max_length=MAX_LEVELS)


class Topology(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["Topology"] = "Topology"
    metadata: ObjectMeta
    spec: TopologySpec

    def level_labels(self) -> list[str]:
        return [level.node_label for level in self.spec.levels]
