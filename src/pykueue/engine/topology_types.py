"""The values the steps of topology-aware placement share: a pod set to place, what kept
nodes out, and how many pods fit in some capacity.

`topology_assigner` places, `topology_placement` and `topology_recovery` ask it to;
these types live apart so that none of them imports another for a data class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pykueue.engine.selectors import NodeSelectorTerm, Toleration
from pykueue.engine.topology_requests import TopologyRequest
from pykueue.engine.topology_snapshot import Requests

INF = 1 << 31


@dataclass(slots=True)
class PodSetPlacement:
    """One pod set to place: its pods' requests (one pod slot included) and constraints."""

    name: str
    count: int
    requests: Requests
    request: TopologyRequest | None
    implied: bool = False
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: Sequence[NodeSelectorTerm] | None = None
    _shape: tuple[object, ...] | None = None

    def shape(self) -> tuple[object, ...]:
        """What the counts of a placement depend on, besides the plan (made once)."""
        if self._shape is None:
            self._shape = (
                tuple(sorted(self.requests.items())),
                self.tolerations,
                tuple(sorted(self.node_selector.items())),
                tuple(self.affinity_terms or ()),
            )
        return self._shape


@dataclass(slots=True)
class Exclusions:
    """Why nodes could not take a pod, counted as upstream reports them."""

    total: int = 0
    node_selector: int = 0
    affinity: int = 0
    topology_domain: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def any(self) -> bool:
        return bool(
            self.node_selector or self.affinity or self.taints or self.topology_domain or self.resources
        )

    def text(self) -> str:
        parts = []
        if self.node_selector:
            parts.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            parts.append(f"affinity: {self.affinity}")
        if self.topology_domain:
            parts.append(f"topologyDomain: {self.topology_domain}")
        parts.extend(f'taint "{taint}": {n}' for taint, n in sorted(self.taints.items()))
        parts.extend(f'resource "{res}": {n}' for res, n in sorted(self.resources.items()))
        return ", ".join(sorted(parts))

    def copy(self) -> Exclusions:
        return Exclusions(
            self.total,
            self.node_selector,
            self.affinity,
            self.topology_domain,
            dict(self.taints),
            dict(self.resources),
        )


def count_in(requests: Mapping[str, int], capacity: Mapping[str, int]) -> tuple[int, str]:
    """How many times ``requests`` fit in ``capacity``, and the resource that limits it."""
    best = INF
    limiting = ""
    for resource in sorted(requests):
        value = requests[resource]
        fits = INF if value == 0 else max(0, capacity.get(resource, 0) // value)
        if fits < best:
            best, limiting = fits, resource
    return best, limiting
