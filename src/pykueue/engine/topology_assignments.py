"""Where the pods of an admitted pod set go: a pod count per topology domain.

This is the engine's form of an admission's ``podSetAssignments[].topologyAssignment``:
``levels`` are the topology levels the values name (only the hostname when the
topology's lowest level is ``kubernetes.io/hostname``, as upstream writes it), and
each domain lists one value per level and its pod count, in the order upstream
writes them (by the domains' full path from the top level down).
`to_v1beta2` gives the API's compact slice form for whoever writes the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pykueue.api.conversion import topology_domains_to_slices
from pykueue.api.workload import TopologyAssignment as ApiTopologyAssignment


@dataclass(frozen=True, slots=True)
class Domain:
    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    levels: tuple[str, ...]
    domains: tuple[Domain, ...]

    def pod_count(self) -> int:
        return sum(domain.count for domain in self.domains)

    def leaf_counts(self) -> dict[str, int]:
        """Pods per leaf domain, keyed as `topology_trees` keys its leaves."""
        result: dict[str, int] = {}
        for domain in self.domains:
            key = leaf_key(domain.values)
            result[key] = result.get(key, 0) + domain.count
        return result

    def to_v1beta1(self) -> dict[str, Any]:
        return {
            "levels": list(self.levels),
            "domains": [{"values": list(d.values), "count": d.count} for d in self.domains],
        }

    def to_v1beta2(self, by_hostname_prefix: bool = True) -> dict[str, Any]:
        """The v1beta2 form; ``by_hostname_prefix`` is gate TASAssignmentsEncodingByHostnamePrefix."""
        return topology_domains_to_slices(self.to_v1beta1(), by_hostname_prefix)


def leaf_key(values: tuple[str, ...] | list[str]) -> str:
    """A leaf's identity: its hostname alone, or its values joined (as upstream's domain IDs)."""
    return ",".join(values)


def from_api(assignment: ApiTopologyAssignment) -> TopologyAssignment:
    return TopologyAssignment(
        tuple(assignment.levels),
        tuple(Domain(tuple(values), count) for values, count in assignment.domains()),
    )
