"""The shape of the cohort trees, as the Cohort and ClusterQueue objects describe it.

`build` makes the nodes of `pykueue.engine.cohort_tree` and links each to its
parent; the quota arithmetic on them stays in `cohort_tree`. A Cohort whose
parents lead back to itself is cut loose (its ClusterQueues are inactive, see
`pykueue.engine.activeness`), as upstream's cycle checker does. `Members` keeps
which ClusterQueues share a root, so that a release wakes only its own tree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pykueue.engine import specs
from pykueue.engine.cohort_tree import Node


def build(
    cohorts: Mapping[str, specs.Cohort], cluster_queues: Mapping[str, specs.ClusterQueue]
) -> tuple[dict[str, Node], dict[str, Node], set[str]]:
    """The ClusterQueues' nodes, the Cohorts' nodes and the Cohorts in a cycle.

    A ClusterQueue or Cohort may name a parent Cohort no object defines: it gets a node
    of its own, with no quota. Usage is not counted here (`cohort_tree.rebuild`).
    """
    nodes: dict[str, Node] = {}
    cohort_nodes: dict[str, Node] = {}

    def cohort_node(name: str) -> Node:
        node = cohort_nodes.get(name)
        if node is None:
            node = Node(name, is_cohort=True)
            cohort_nodes[name] = node
        return node

    for cohort in cohorts.values():
        cohort_node(cohort.name)
    for cohort in cohorts.values():
        node = cohort_nodes[cohort.name]
        node.quotas = dict(cohort.quotas)
        node.weight = cohort.fair_weight
        if cohort.parent:
            parent = cohort_node(cohort.parent)
            node.parent = parent
            parent.children.append(node)
    in_cycle = cohorts_in_cycles(cohorts)
    for name in in_cycle:
        node = cohort_nodes[name]
        if node.parent is not None and node in node.parent.children:
            node.parent.children.remove(node)
        node.parent = None
    for cq in cluster_queues.values():
        node = Node(cq.name, is_cohort=False, quotas=dict(cq.quotas), weight=cq.fair_weight)
        nodes[cq.name] = node
        if cq.cohort:
            parent = cohort_node(cq.cohort)
            node.parent = parent
            parent.children.append(node)
    return nodes, cohort_nodes, in_cycle


def cohorts_in_cycles(cohorts: Mapping[str, specs.Cohort]) -> set[str]:
    """The Cohorts whose chain of parents comes back to them."""
    result: set[str] = set()
    for start in cohorts:
        seen: list[str] = []
        name = start
        while name and name not in seen:
            seen.append(name)
            cohort = cohorts.get(name)
            name = cohort.parent if cohort is not None else ""
        if name:
            result.update(seen[seen.index(name) :])
    return result


def root_name(cohorts: Mapping[str, specs.Cohort], name: str) -> str:
    """The root of ``name``'s tree (``name`` itself for a root; a cycle stops where it repeats)."""
    seen: set[str] = set()
    while name in cohorts and cohorts[name].parent and name not in seen:
        seen.add(name)
        name = cohorts[name].parent
    return name


@dataclass(slots=True)
class Members:
    """The ClusterQueues of each cohort tree, by the name of its root Cohort.

    Worked out once when first asked and then kept as queues join (`note`), so a release
    looks only at its own tree's queues: before, a cluster with nothing parked looked at
    every queue per release. Any other change of the trees' shape forgets it (`clear`).
    """

    _by_root: dict[str, list[str]] = field(default_factory=dict)

    def clear(self) -> None:
        self._by_root.clear()

    def of_tree(
        self,
        cohort: str,
        cohorts: Mapping[str, specs.Cohort],
        cluster_queues: Mapping[str, specs.ClusterQueue],
    ) -> Sequence[str]:
        """The ClusterQueues in the tree ``cohort`` belongs to, in `cluster_queues` order."""
        if not self._by_root:
            for name, cq in cluster_queues.items():
                if cq.cohort:
                    self._by_root.setdefault(root_name(cohorts, cq.cohort), []).append(name)
        return self._by_root.get(root_name(cohorts, cohort), ())

    def note(
        self, cq: specs.ClusterQueue, old: specs.ClusterQueue | None, cohorts: Mapping[str, specs.Cohort]
    ) -> None:
        """``cq`` was applied (``old``: its previous version, None when new)."""
        if old is not None and old.cohort == cq.cohort:
            return  # same tree
        if old is None and (not cq.cohort or not self._by_root):
            return  # in no tree, or the members are worked out when next needed
        if old is None:
            # A new queue comes last, as it does in `cluster_queues`: a thousand queues
            # loading one by one must not work the whole tree out again each time.
            self._by_root.setdefault(root_name(cohorts, cq.cohort), []).append(cq.name)
            return
        self._by_root.clear()


def ancestors(cohorts: Mapping[str, specs.Cohort], name: str) -> Iterator[specs.Cohort]:
    """``name``'s Cohort and those above it, nearest first; stops at a Cohort only named by its
    members (no object, so no parent) and where a cycle (refused elsewhere) would repeat."""
    seen: set[str] = set()
    while name and name not in seen:
        seen.add(name)
        cohort = cohorts.get(name)
        if cohort is None:
            return
        yield cohort
        name = cohort.parent
