"""The cohort tree: subtree quotas, available capacity and usage accounting.

The reference hierarchy used throughout (quantities in cpus, one flavor ``f``):

    root   (own quota 10)
    ├── mid  (no own quota)
    │   ├── a  nominal 6, lendingLimit 2, borrowingLimit 3
    │   └── b  nominal 4
    └── c    nominal 5, lendingLimit 1

so the subtree quotas are a 6 (4 kept at home), b 4, mid 2+4 = 6, c 5 (4 kept at
home), root 10 + 6 + 1 = 17; the whole tree holds 25 cpus.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykueue.engine import cohort_tree
from pykueue.engine.cohort_tree import Node

from .builders import Cluster, milli, q

F = ("f", "cpu")


def reference() -> Cluster:
    return (
        Cluster()
        .cohort("root", quota={"f": {"cpu": 10}})
        .cohort("mid", parent="root")
        .cq("a", {"f": {"cpu": q(6, borrow=3, lend=2)}}, cohort="mid")
        .cq("b", {"f": {"cpu": 4}}, cohort="mid")
        .cq("c", {"f": {"cpu": q(5, lend=1)}}, cohort="root")
    )


def usages(c: Cluster) -> dict[str, int]:
    c.state.ensure_tree()
    nodes = {**c.state.nodes, **c.state.cohort_nodes}
    return {name: node.usage.get(F, 0) for name, node in sorted(nodes.items())}


def test_subtree_quota_adds_what_children_lend() -> None:
    c = reference()
    got = {n: c.node(n).subtree_quota.get(F, 0) for n in ("a", "b", "c", "mid", "root")}
    assert got == {"a": milli(6), "b": milli(4), "c": milli(5), "mid": milli(6), "root": milli(17)}
    assert c.node("a").local_quota(F) == milli(4)
    assert c.node("b").local_quota(F) == 0
    assert c.node("c").local_quota(F) == milli(4)


def test_available_when_idle_respects_borrowing_and_lending_limits() -> None:
    c = reference()
    # a: nominal 6 + borrowingLimit 3.
    assert c.available("a", "f") == milli(9)
    # b: everything but what a and c keep at home (4 + 4).
    assert c.available("b", "f") == milli(25 - 8)
    # c: its own 4 at home plus all the root offers.
    assert c.available("c", "f") == milli(4 + 17)
    assert c.available("mid", "f") == milli(17)
    assert c.available("root", "f") == milli(17)


def test_potential_available_ignores_usage() -> None:
    c = reference().admitted("big", "b", cpu=15)
    assert cohort_tree.potential_available(c.node("a"), F) == milli(9)
    assert cohort_tree.potential_available(c.node("b"), F) == milli(17)
    assert cohort_tree.potential_available(c.node("c"), F) == milli(21)
    # ... while available sees the 15 b uses.
    assert c.available("b", "f") == milli(2)
    assert c.available("c", "f") == milli(4 + 2)
    assert c.available("a", "f") == milli(4 + 2)


def test_borrowing_limit_caps_available_below_what_the_cohort_has() -> None:
    c = reference().admitted("w", "a", cpu=7)
    # a borrows 1 beyond its 6; its limit leaves 2 more.
    assert c.available("a", "f") == milli(2)
    # b and c see the 3 a keeps in the cohort beyond its home quota of 4.
    assert c.available("b", "f") == milli(17 - 3)
    assert c.available("c", "f") == milli(4 + 17 - 3)


def test_lending_limit_keeps_home_quota_for_its_owner() -> None:
    c = reference().admitted("w", "b", cpu=17)
    # b took everything lendable: a and c still have what they keep at home.
    assert c.available("b", "f") == 0
    assert c.available("a", "f") == milli(4)
    assert c.available("c", "f") == milli(4)
    assert c.available("root", "f") == 0


def test_usage_within_local_quota_stays_at_the_queue() -> None:
    c = reference().admitted("w", "a", cpu=3)
    assert usages(c) == {"a": milli(3), "b": 0, "c": 0, "mid": 0, "root": 0}


def test_usage_beyond_local_quota_bubbles_up_to_the_root() -> None:
    c = reference().admitted("w", "a", cpu=7)
    # 4 stay at home, 3 are stored in mid and therefore in root.
    assert usages(c) == {"a": milli(7), "b": 0, "c": 0, "mid": milli(3), "root": milli(3)}
    c.admitted("x", "c", cpu=6)
    assert usages(c) == {"a": milli(7), "b": 0, "c": milli(6), "mid": milli(3), "root": milli(5)}


def test_usage_goes_back_down_exactly() -> None:
    c = reference().admitted("first", "a", cpu=3).admitted("second", "a", cpu=3).admitted("x", "b", cpu=5)
    assert usages(c) == {"a": milli(6), "b": milli(5), "c": 0, "mid": milli(7), "root": milli(7)}
    # Releasing the first (which was inside the home quota when admitted) must free
    # what is now stored in the parent, not leave it stranded there.
    c.finish("first")
    assert usages(c) == {"a": milli(3), "b": milli(5), "c": 0, "mid": milli(5), "root": milli(5)}
    c.finish("x", "second")
    assert usages(c) == {"a": 0, "b": 0, "c": 0, "mid": 0, "root": 0}


def test_cohort_borrowing_limit_caps_its_whole_subtree() -> None:
    c = (
        Cluster()
        .cohort("root", quota={"f": {"cpu": 10}})
        .cohort("mid", parent="root", quota={"f": {"cpu": q(2, borrow=3)}})
        .cq("a", {"f": {"cpu": 2}}, cohort="mid")
        .cq("b", {"f": {"cpu": 0}}, cohort="root")
    )
    # mid's subtree holds 2 + 2 = 4 and may borrow 3 more from the root.
    assert c.available("a", "f") == milli(7)
    assert cohort_tree.potential_available(c.node("a"), F) == milli(7)
    assert c.available("b", "f") == milli(14)
    c.admitted("w", "a", cpu=6)
    assert c.available("a", "f") == milli(1)
    assert c.available("b", "f") == milli(14 - 6)


def _clone(node: Node) -> Node:
    copy = Node(node.name, node.is_cohort, dict(node.quotas), weight=node.weight)
    for child in node.children:
        twin = _clone(child)
        twin.parent = copy
        copy.children.append(twin)
    return copy


def _node_usages(root: Node) -> dict[str, dict[tuple[str, str], int]]:
    return {n.name: {fr: v for fr, v in n.usage.items() if v} for n in root.iter_subtree()}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 6), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_incremental_usage_equals_rebuild(ops: list[tuple[str, int, bool]]) -> None:
    """Any sequence of admissions and releases leaves the same usages as a rebuild from scratch."""
    c = reference()
    live: list[str] = []
    for i, (cq, size, release) in enumerate(ops):
        if release and live:
            c.finish(live.pop(size % len(live)))
        else:
            c.admitted(f"w{i}", cq, cpu=size)
            live.append(f"w{i}")
        root = c.node("root")
        fresh = _clone(root)
        cohort_tree.rebuild(fresh, c.state.cq_usage)
        assert _node_usages(fresh) == _node_usages(root)
    for name in list(live):
        c.finish(name)
    assert all(v == 0 for v in usages(c).values())
