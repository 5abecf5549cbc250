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
    """The nodes this flavor stands for: their labels, taints and topology."""

    node_labels: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_NODE_LABELS,
        description="Labels of the nodes this flavor stands for; admitted pods get them as node selectors.",
    )
    node_taints: list[Taint] = Field(
        default_factory=list,
        max_length=MAX_NODE_TAINTS,
        description="Taints of those nodes; a workload gets this flavor only if it tolerates them.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=MAX_TOLERATIONS,
        description="Tolerations added to admitted pods, for taints of the nodes this flavor stands for.",
    )
    topology_name: DNSSubdomain | None = Field(
        None, description="The Topology of these nodes, for topology-aware scheduling."
    )


class ResourceFlavor(KubeModel):
    """A kind of node (GPU model, spot or on-demand...) that ClusterQueues set quota for; cluster-scoped."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
