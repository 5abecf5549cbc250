"""The tree of Cohorts and ClusterQueues, and how quota flows through it.

One generic node type serves ClusterQueues (leaves) and Cohorts (inner
nodes), following Kueue's hierarchical model:

* ``subtree_quota`` of a node is its own nominal quota plus what its children
  lend to it: each child's subtree quota minus the part its ``lendingLimit``
  keeps at home (its *local quota*).
* ``usage`` of a ClusterQueue is what its admitted workloads use; the usage of
  a Cohort is the sum of its children's usage beyond their local quota.
* ``available`` walks to the root: a node may use its local quota freely and
  borrow from its parent within the parent's availability and its own
  ``borrowingLimit``.

Usage changes are incremental (`add_usage` / `remove_usage`); quota changes
rebuild the tree from its root (`rebuild`). Both are cheap enough to run in
every scheduling cycle, and a simulated change is undone by the inverse call,
so the scheduler never copies the tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pykueue.engine.resources import FlavorResource, Quantities


@dataclass(frozen=True, slots=True)
class Quota:
    """The quota of one flavor-resource at one node; ``None`` limits mean unlimited."""

    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(eq=False, slots=True)
class Node:
    """A ClusterQueue or a Cohort in the tree."""

    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree_quota: Quantities = field(default_factory=dict)
    usage: Quantities = field(default_factory=dict)
    weight: float = 1.0  # fair-sharing weight
    cached_height: int = -1  # set by `rebuild`; the tree's shape only changes there

    def local_quota(self, fr: FlavorResource) -> int:
        """Capacity only this subtree sees: what the lending limit keeps from the parent."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree_quota.get(fr, 0) - quota.lending_limit)

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        """Would using ``value`` more exceed this node's own subtree quota?"""
        return self.subtree_quota.get(fr, 0) < self.usage.get(fr, 0) + value

    def path_to_root(self) -> Iterator[Node]:
        """The ancestors of this node, nearest first."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def iter_subtree(self) -> Iterator[Node]:
        """This node and all its descendants, depth first, children in insertion order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def cluster_queues(self) -> Iterator[Node]:
        """The ClusterQueues in this subtree."""
        return (node for node in self.iter_subtree() if not node.is_cohort)

    def height(self) -> int:
        """Kueue's node height: 0 for a ClusterQueue, 1 for a Cohort of queues, more above."""
        if self.cached_height >= 0:
            return self.cached_height
        return self._compute_height()

    def _compute_height(self) -> int:
        if not self.is_cohort:
            return 0
        best = min(len(self.children), 1)
        for child in self.children:
            if child.is_cohort:
                best = max(best, child.height() + 1)
        return best


def available(node: Node, fr: FlavorResource) -> int:
    """What ``node`` could still use of ``fr`` now (negative when over-admitted)."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    from_parent = available(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        local = node.local_quota(fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - local
        used_in_parent = max(0, node.usage.get(fr, 0) - local)
        from_parent = min(from_parent, stored_in_parent - used_in_parent + quota.borrowing_limit)
    return node.local_available(fr) + from_parent


def potential_available(node: Node, fr: FlavorResource) -> int:
    """The most ``node`` could ever use of ``fr`` if nothing else used any."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0)
    total = node.local_quota(fr) + potential_available(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        total = min(total, node.subtree_quota.get(fr, 0) + quota.borrowing_limit)
    return total


def add_usage(node: Node, fr: FlavorResource, value: int) -> None:
    """Account ``value`` at ``node``; what exceeds its local quota bubbles up."""
    current: Node | None = node
    while current is not None and value:
        local_free = current.local_available(fr)
        current.usage[fr] = current.usage.get(fr, 0) + value
        if value <= local_free:
            return
        value -= local_free
        current = current.parent


def remove_usage(node: Node, fr: FlavorResource, value: int) -> None:
    """Release ``value`` at ``node``, and the part of it that was stored in the parent."""
    current: Node | None = node
    while current is not None and value:
        stored_in_parent = current.usage.get(fr, 0) - current.local_quota(fr)
        current.usage[fr] = current.usage.get(fr, 0) - value
        if stored_in_parent <= 0:
            return
        value = min(value, stored_in_parent)
        current = current.parent


def add_usages(node: Node, usage: Quantities, sign: int = 1) -> None:
    """Add (sign=1) or remove (sign=-1) a whole usage map at ``node``."""
    for fr, value in usage.items():
        if sign > 0:
            add_usage(node, fr, value)
        else:
            remove_usage(node, fr, value)


def rebuild(root: Node, leaf_usage: dict[str, Quantities]) -> None:
    """Recompute subtree quotas and usages from the quotas and the ClusterQueues' own usage."""
    _rebuild(root, leaf_usage)


def _rebuild(node: Node, leaf_usage: dict[str, Quantities]) -> None:
    node.cached_height = -1
    node.cached_height = node._compute_height()
    node.subtree_quota = {fr: quota.nominal for fr, quota in node.quotas.items()}
    if not node.is_cohort:
        node.usage = dict(leaf_usage.get(node.name, {}))
        return
    node.usage = {}
    for child in node.children:
        _rebuild(child, leaf_usage)
        for fr, quota in child.subtree_quota.items():
            node.subtree_quota[fr] = node.subtree_quota.get(fr, 0) + quota - child.local_quota(fr)
        for fr, used in child.usage.items():
            node.usage[fr] = node.usage.get(fr, 0) + max(0, used - child.local_quota(fr))


def lowest_fitting_height(cq: Node, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """How high in the tree ``cq`` must borrow to fit ``value`` more of ``fr``.

    Returns the height of the lowest subtree that holds the request (0 when it
    fits in the ClusterQueue's own quota) and whether quota could still be
    reclaimed from somewhere in the hierarchy above that level.
    """
    if not cq.borrowing_with(fr, value) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = value - cq.local_available(fr)
    for node in cq.path_to_root():
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.local_available(fr)
    return cq.root().height(), False
