"""ResourceFlavor: a named kind of capacity (spot vs on-demand, a GPU model, a zone).

A flavor says which nodes its quota stands for: ``nodeLabels`` are added to the pods
of a workload admitted on it, ``nodeTaints`` must be tolerated by the workload for the
flavor to be chosen, and ``tolerations`` are added to the pods. A flavor with a
``topologyName`` takes part in topology-aware scheduling.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.core import Taint, Toleration
from pykueue.api.meta import DNSSubdomain, KubeModel, ObjectMeta

MAX_NODE_LABELS = 8
MAX_NODE_TAINTS = 8
MAX_TOLERATIONS = 8


class ResourceFlavorSpec(KubeModel):
    node_labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_NODE_LABELS)
    node_taints: list[Taint] = Field(default_factory=list, max_length=MAX_NODE_TAINTS)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=MAX_TOLERATIONS)
    topology_name: DNSSubdomain | None = None


class ResourceFlavor(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
