"""The nodes as topology-aware scheduling sees them: domains, capacity and usage.

`Cluster` holds what the engine reads about the data centre — Topology
objects, Nodes, and the pods running on them that the engine does not manage
— and the TAS usage of every admitted workload, per flavor and leaf domain.

`FlavorSnapshot` is the tree of one topology-aware ResourceFlavor:

    level 0      b1                     b2            (e.g. blocks)
    level 1    r1    r2               r3              (racks)
    leaves    x1 x2  x3              x4 x5            (hosts: the lowest level)

Only nodes that carry every node label of the flavor and a value for every
level, are Ready and schedulable, belong to it. A leaf's free capacity is the
sum of its nodes' allocatable less the requests of the pods already running
there; the TAS usage of admitted workloads is subtracted when a placement is
computed (`remaining`), so admitting or preempting a workload never rebuilds
the tree. When the lowest level is ``kubernetes.io/hostname`` a leaf is one
node, known by its hostname alone (as upstream names it in assignments), and
its taints and labels are checked against each pod set.

A tree is rebuilt only when nodes, pods, topologies or flavors change
(`Cluster.version`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pykueue.api.topology import HOSTNAME_LABEL
from pykueue.engine import specs
from pykueue.engine.resources import PODS
from pykueue.engine.selectors import Taint, Toleration
from pykueue.engine.topology_assignments import TopologyAssignment, leaf_key
from pykueue.engine.workloads import Workload

Requests = dict[str, int]
# Pods of one pod set placed by topology: (TAS flavor, where, one pod's requests).
Placement = tuple[str, TopologyAssignment, Requests]
_EMPTY: Requests = {}
MAX_LOG = 4096


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]  # milli-units
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    def usable(self) -> bool:
        return self.ready and not self.unschedulable


@dataclass(slots=True, eq=False)
class Domain:
    """One topology domain; ``idx`` addresses the per-placement counters."""

    idx: int
    values: tuple[str, ...]
    key: str
    parent: Domain | None = None
    children: list[Domain] = field(default_factory=list)
    node: NodeView | None = None  # leaves of a hostname topology
    capacity: Requests = field(default_factory=dict)  # leaves: allocatable less non-TAS pods
    pos: int = -1  # leaves: position in `FlavorSnapshot.leaf_list`

    def within(self, key: str) -> bool:
        """Is this domain ``key`` or inside it?"""
        node: Domain | None = self
        while node is not None:
            if node.key == key:
                return True
            node = node.parent
        return False


@dataclass(slots=True)
class FlavorSnapshot:
    flavor: str
    topology: str
    levels: tuple[str, ...]
    tolerations: tuple[Toleration, ...]
    domains: list[Domain]
    per_level: list[list[Domain]]
    leaves: dict[str, Domain]
    usage: dict[str, Requests]  # live: leaf key -> TAS usage of admitted workloads
    usage_version: list[int]  # shared with `Cluster`: moves whenever any TAS usage changes
    leaf_list: list[Domain] = field(default_factory=list)
    # Placements reuse what does not change between them (engine/topology_assigner.py):
    # free capacity per resource until the usage moves, feasible leaves per pod shape.
    cache: dict[object, object] = field(default_factory=dict)
    log: list[tuple[int, str]] = field(default_factory=list)  # (usage version, leaf key)

    @property
    def lowest_is_host(self) -> bool:
        return self.levels[-1] == HOSTNAME_LABEL

    def level_index(self, label: str) -> int:
        try:
            return self.levels.index(label)
        except ValueError:
            return -1

    def free_columns(self, simulate_empty: bool) -> dict[str, list[int]]:
        """Per resource, the free capacity of every leaf (by `Domain.pos`), cached."""
        key = ("free", simulate_empty)
        cached = self.cache.get(key)
        # With every TAS workload assumed gone the columns do not move with the usage: they
        # last as long as the tree (a preemptor's trial removals must not throw them away).
        version = -1 if simulate_empty else self.usage_version[0]
        if isinstance(cached, tuple) and cached[0] == version:
            return cached[1]  # type: ignore[no-any-return]
        resources = sorted({r for leaf in self.leaf_list for r in leaf.capacity})
        columns: dict[str, list[int]] = {}
        usage = {} if simulate_empty else self.usage
        for resource in resources:
            columns[resource] = [
                leaf.capacity.get(resource, 0) - usage.get(leaf.key, _EMPTY).get(resource, 0)
                for leaf in self.leaf_list
            ]
        self.cache[key] = (version, columns)
        return columns

    def apply_usage(self, key: str, delta: Requests, version: int) -> None:
        """TAS usage of one leaf moved by ``delta``: keep the free columns current, log the leaf."""
        leaf = self.leaves.get(key)
        if leaf is None:
            return
        cached = self.cache.get(("free", False))
        if isinstance(cached, tuple):
            columns = cached[1]
            for resource, value in delta.items():
                column = columns.get(resource)
                if column is not None:  # no node has it: every count with it is 0 anyway
                    column[leaf.pos] -= value
            self.cache[("free", False)] = (version, columns)
        self.log.append((version, key))
        if len(self.log) > MAX_LOG:
            del self.log[: MAX_LOG // 2]

    def changed_since(self, version: int) -> set[str] | None:
        """Leaves whose usage moved after ``version`` (None: the log does not reach back)."""
        if version >= self.usage_version[0]:
            return set()
        if not self.log or self.log[0][0] > version + 1:
            return None
        changed: set[str] = set()
        for at, key in reversed(self.log):
            if at <= version:
                break
            changed.add(key)
        return changed

    def remaining(self, leaf: Domain, simulate_empty: bool = False) -> Requests:
        """Free capacity of a leaf, less TAS usage unless every TAS workload is assumed gone."""
        free = dict(leaf.capacity)
        if not simulate_empty:
            for resource, value in self.usage.get(leaf.key, {}).items():
                free[resource] = free.get(resource, 0) - value
        return free


@dataclass(slots=True)
class Cluster:
    topologies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    nodes: dict[str, NodeView] = field(default_factory=dict)
    pods: dict[str, tuple[str, Requests]] = field(default_factory=dict)  # ns/name -> (node, requests)
    # flavor -> leaf key -> TAS usage (requests and pods) of admitted workloads, for flavors
    # whose topology does not end at the host.
    usage: dict[str, dict[str, Requests]] = field(default_factory=dict)
    # hostname -> TAS usage of admitted workloads in every flavor whose topology ends at the
    # host: two such flavors may select the same nodes, and a node has one capacity.
    host_usage: dict[str, Requests] = field(default_factory=dict)
    # TASHandleOverlappingFlavors; off, every flavor keeps its own usage. Set once, before
    # any usage is counted (the state sets it from its configuration).
    share_hosts: bool = True
    tas_flavors: set[str] = field(default_factory=set)
    version: int = 0
    _usage_version: list[int] = field(default_factory=lambda: [0])
    _trees: dict[str, tuple[int, specs.ResourceFlavor, FlavorSnapshot | None]] = field(default_factory=dict)
    # The current trees whose lowest level is the host, at `version` (None: to recompute):
    # every TAS usage change of a host reaches them all, and usage changes are frequent.
    _host_trees: tuple[int, list[FlavorSnapshot]] | None = None

    # ------------------------------------------------------------ objects

    def apply_topology(self, name: str, levels: tuple[str, ...]) -> None:
        self.topologies[name] = levels
        self.version += 1

    def delete_topology(self, name: str) -> None:
        if self.topologies.pop(name, None) is not None:
            self.version += 1

    def apply_node(self, node: NodeView) -> None:
        self.nodes[node.name] = node
        self.version += 1

    def delete_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self.version += 1

    def apply_pod(self, key: str, node: str, requests: Requests | None) -> None:
        """A running pod (``requests`` None: it ended and holds nothing)."""
        if requests is None:
            self.delete_pod(key)
            return
        self.pods[key] = (node, requests)
        self.version += 1

    def delete_pod(self, key: str) -> None:
        if self.pods.pop(key, None) is not None:
            self.version += 1

    def apply_flavor(self, flavor: specs.ResourceFlavor) -> None:
        if flavor.topology_name:
            self.tas_flavors.add(flavor.name)
        else:
            self.tas_flavors.discard(flavor.name)
        self.version += 1

    def delete_flavor(self, name: str) -> None:
        self.tas_flavors.discard(name)
        self.version += 1

    # ------------------------------------------------------------- usage

    def account(self, wl: Workload, sign: int) -> None:
        """Add (sign=1) or remove (-1) the TAS usage of an admitted workload."""
        self.account_placements(self.placements_of(wl), sign)

    def placements_of(self, wl: Workload) -> list[Placement]:
        """The pods of an admitted workload placed by topology."""
        if wl.admission is None:
            return []
        per_pod = {ps.name: ps for ps in wl.pod_sets}
        placements: list[Placement] = []
        for assignment in wl.admission.pod_sets:
            if assignment.topology is None:
                continue
            spec = per_pod.get(assignment.name)
            flavor = self.tas_flavor_of(assignment.flavors)
            if spec is None or flavor is None:
                continue
            placements.append((flavor, assignment.topology, pod_requests(spec.pod_requests)))
        return placements

    def account_placements(self, placements: list[Placement], sign: int) -> None:
        """Add or remove the TAS usage of pods placed by topology, admitted or only held
        for a cycle (a preemptor's placement, engine/scheduler.py)."""
        if not placements:
            return
        self._usage_version[0] += 1
        version = self._usage_version[0]
        for flavor, topology, requests in placements:
            shared = self.share_hosts and bool(topology.levels) and topology.levels[-1] == HOSTNAME_LABEL
            usage = self.host_usage if shared else self.usage.setdefault(flavor, {})
            # Leaves keyed by hostname are the same nodes in every flavor whose topology ends
            # at the host: their free columns all move (upstream's TASHandleOverlappingFlavors).
            snaps: list[FlavorSnapshot | None] = (
                list(self._host_snapshots()) if shared else [self._current(flavor)]
            )
            for key, count in topology.leaf_counts().items():
                leaf = usage.setdefault(key, {})
                delta = {resource: sign * value * count for resource, value in requests.items()}
                for resource, value in delta.items():
                    leaf[resource] = leaf.get(resource, 0) + value
                for snap in snaps:
                    if snap is not None:
                        snap.apply_usage(key, delta, version)

    def _host_snapshots(self) -> list[FlavorSnapshot]:
        cached = self._host_trees
        if cached is None or cached[0] != self.version:
            trees = [
                tree
                for version, _, tree in self._trees.values()
                if version == self.version and tree is not None and tree.lowest_is_host
            ]
            cached = self._host_trees = (self.version, trees)
        return cached[1]

    def _current(self, flavor: str) -> FlavorSnapshot | None:
        cached = self._trees.get(flavor)
        return cached[2] if cached is not None and cached[0] == self.version else None

    def tas_flavor_of(self, flavors: Mapping[str, str]) -> str | None:
        """The one topology-aware flavor among a pod set's flavors (upstream allows one)."""
        for resource in sorted(flavors):
            if flavors[resource] in self.tas_flavors:
                return flavors[resource]
        return None

    # ------------------------------------------------------------- trees

    def snapshot(self, flavor: specs.ResourceFlavor) -> FlavorSnapshot | None:
        """The flavor's tree (None: not topology-aware, or its Topology does not exist)."""
        if not flavor.topology_name:
            return None
        cached = self._trees.get(flavor.name)
        if cached is not None and cached[0] == self.version and cached[1] is flavor:
            return cached[2]
        levels = self.topologies.get(flavor.topology_name)
        tree = None if levels is None else self._build(flavor, levels)
        self._trees[flavor.name] = (self.version, flavor, tree)
        self._host_trees = None
        return tree

    def _build(self, flavor: specs.ResourceFlavor, levels: tuple[str, ...]) -> FlavorSnapshot:
        by_host = levels[-1] == HOSTNAME_LABEL
        leaves: dict[str, Domain] = {}
        node_to_leaf: dict[str, Domain] = {}
        for node in sorted(self.nodes.values(), key=lambda n: n.name):
            if not node.usable() or not _belongs(node, flavor.node_labels, levels):
                continue
            values = tuple(node.labels[label] for label in levels)
            key = values[-1] if by_host else leaf_key(values)
            leaf = leaves.get(key)
            if leaf is None:
                leaf = Domain(0, values, key, node=node if by_host else None)
                leaves[key] = leaf
            node_to_leaf[node.name] = leaf
            for resource, value in node.allocatable.items():
                leaf.capacity[resource] = leaf.capacity.get(resource, 0) + value
        for node_name, requests in self.pods.values():
            found = node_to_leaf.get(node_name)
            if found is None:
                continue
            for resource, value in requests.items():
                found.capacity[resource] = found.capacity.get(resource, 0) - value
        usage = self.host_usage if by_host and self.share_hosts else self.usage.setdefault(flavor.name, {})
        return _tree(flavor, levels, leaves, usage, self._usage_version)


def _tree(
    flavor: specs.ResourceFlavor,
    levels: tuple[str, ...],
    leaves: dict[str, Domain],
    usage: dict[str, Requests],
    usage_version: list[int],
) -> FlavorSnapshot:
    depth = len(levels)
    per_level: list[dict[tuple[str, ...], Domain]] = [{} for _ in levels]
    domains: list[Domain] = []
    for leaf in leaves.values():
        per_level[depth - 1][leaf.values] = leaf
    for level in range(depth - 1, 0, -1):
        for values, child in sorted(per_level[level].items()):
            parent_values = values[:-1]
            parent = per_level[level - 1].get(parent_values)
            if parent is None:
                parent = Domain(0, parent_values, leaf_key(parent_values))
                per_level[level - 1][parent_values] = parent
            child.parent = parent
            parent.children.append(child)
    ordered = [sorted(level.values(), key=lambda d: d.values) for level in per_level]
    for level_domains in ordered:
        for domain in level_domains:
            domain.idx = len(domains)
            domains.append(domain)
    return FlavorSnapshot(
        flavor=flavor.name,
        topology=flavor.topology_name,
        levels=levels,
        tolerations=flavor.tolerations,
        domains=domains,
        per_level=ordered,
        leaves=leaves,
        usage=usage,
        usage_version=usage_version,
        leaf_list=_positions(ordered[-1] if ordered else []),
    )


def _positions(leaves: list[Domain]) -> list[Domain]:
    for pos, leaf in enumerate(leaves):
        leaf.pos = pos
    return leaves


def _belongs(node: NodeView, flavor_labels: Mapping[str, str], levels: tuple[str, ...]) -> bool:
    labels = node.labels
    return all(labels.get(k) == v for k, v in flavor_labels.items()) and all(lv in labels for lv in levels)


def pod_requests(requests: Mapping[str, int]) -> Requests:
    """One pod's requests as placement counts them: its resources and one pod slot."""
    result = dict(requests)
    result[PODS] = result.get(PODS, 0) + 1000
    return result
