"""Fair sharing: dominant resource shares, the fair admission order, fair preemption."""

from __future__ import annotations

import math

import pytest

from pykueue.engine import fair_sharing

from .builders import ANY, Cluster, q


def borrower(weight: float, used: float, *, lend_b: float | None = None, memory: bool = False) -> Cluster:
    """a and b each hold 10 cpus in one cohort; a uses ``used`` of them."""
    quota_a: dict[str, object] = {"cpu": 10}
    quota_b: dict[str, object] = {"cpu": q(10, lend=lend_b)}
    if memory:
        quota_a["memory"] = 10
        quota_b["memory"] = 10
    c = (
        Cluster(fair_sharing=True)
        .cq("a", {"f": quota_a}, cohort="co", weight=weight)  # type: ignore[dict-item]
        .cq("b", {"f": quota_b}, cohort="co")  # type: ignore[dict-item]
    )
    requests = {"cpu": used, "memory": 12} if memory else {"cpu": used}
    return c.admitted("w", "a", **requests)


@pytest.mark.parametrize(
    ("weight", "value"),
    [(1.0, 250.0), (2.0, 125.0), (0.5, 500.0)],
)
def test_share_of_a_borrowing_queue_is_borrowed_over_lendable_divided_by_weight(
    weight: float, value: float
) -> None:
    # a borrows 5 of the cohort's 20 cpus: 250 per mille, before the weight.
    share = fair_sharing.share_of(borrower(weight, 15).node("a"))
    assert share.borrowing
    assert share.ratio == pytest.approx(250.0)
    assert share.value() == pytest.approx(value)
    assert share.rounded() == math.ceil(value)
    assert share.resource == "cpu"


def test_share_of_a_weight_zero_borrower_is_infinite_and_always_loses() -> None:
    share = fair_sharing.share_of(borrower(0.0, 15).node("a"))
    assert share.value() == math.inf
    assert share.zero_weight_borrows()
    assert share.rounded() == 2**63 - 1
    huge = fair_sharing.share_of(borrower(1.0, 20).node("a"))
    assert fair_sharing.compare(share, huge) > 0
    assert fair_sharing.compare(huge, share) < 0


@pytest.mark.parametrize("weight", [0.0, 1.0, 3.0])
def test_share_of_a_queue_within_its_quota_is_zero_whatever_its_weight(weight: float) -> None:
    share = fair_sharing.share_of(borrower(weight, 10).node("a"))
    assert share.value() == 0
    assert not share.borrowing
    assert not share.zero_weight_borrows()


def test_lending_limit_shrinks_what_the_parent_can_lend() -> None:
    # b lends only 4: the cohort holds 14, a borrows 5 of them.
    share = fair_sharing.share_of(borrower(1.0, 15, lend_b=4).node("a"))
    assert share.value() == pytest.approx(5000 / 14)


def test_dominant_resource_is_the_one_borrowed_the_most() -> None:
    # cpu: 5 of 20 borrowed (250); memory: 2 of 20 (100).
    share = fair_sharing.share_of(borrower(1.0, 15, memory=True).node("a"))
    assert share.resource == "cpu"
    assert share.value() == pytest.approx(250.0)


def test_share_with_extra_usage_is_the_share_after_admission() -> None:
    c = borrower(1.0, 10)
    node = c.node("a")
    assert fair_sharing.share_of(node).value() == 0
    assert fair_sharing.share_of(node, {("f", "cpu"): 4000}).value() == pytest.approx(200.0)
    assert fair_sharing.share_of(node).value() == 0, "the extra usage is not left behind"


@pytest.mark.parametrize(
    ("weight_a", "weight_b", "winner"), [(1, 1, "a"), (0, 1, "b"), (1, 0, "a"), (1, 3, "b")]
)
def test_fair_order_admits_the_entry_with_the_lower_share_after_admission(
    weight_a: float, weight_b: float, winner: str
) -> None:
    """Both heads borrow 3 of the lender's 4 cpus; only one fits."""
    c = (
        Cluster(fair_sharing=True)
        .cq("a", {"f": {"cpu": 0}}, cohort="co", weight=weight_a)
        .cq("b", {"f": {"cpu": 0}}, cohort="co", weight=weight_b)
        .cq("lender", {"f": {"cpu": 4}}, cohort="co")
        .pending("from-a", "a", cpu=3, created=0)
        .pending("from-b", "b", cpu=3, created=10)
    )
    c.cycle()
    assert c.admitted_names() == {f"from-{winner}"}


def test_fair_share_borrowing_does_not_exceed_what_the_lender_has() -> None:
    c = (
        Cluster(fair_sharing=True)
        .cq("a", {"f": {"cpu": 0}}, cohort="co", weight=0)
        .cq("lender", {"f": {"cpu": 4}}, cohort="co")
    )
    for i in range(5):
        c.pending(f"w{i}", "a", cpu=1, created=i)
    c.settle()
    # Weight 0 makes a lose every comparison, but with no competitor it still borrows.
    assert c.admitted_names() == {"w0", "w1", "w2", "w3"}


def unequal_borrowers(fair: bool) -> Cluster:
    """b borrows 2 cpus, c borrows 1 (and admitted its workloads last); a reclaims 1 cpu."""
    c = Cluster(fair_sharing=fair)
    c.cq("a", {"f": {"cpu": 3}}, cohort="co", reclaim=ANY)
    c.cq("b", {"f": {"cpu": 3}}, cohort="co")
    c.cq("c", {"f": {"cpu": 3}}, cohort="co")
    for i in range(5):
        c.admitted(f"b{i}", "b", cpu=1, admitted_at=i)
    for i in range(4):
        c.admitted(f"c{i}", "c", cpu=1, admitted_at=10 + i)
    return c.pending("a-wants", "a", cpu=1)


def test_fair_preemption_takes_from_the_queue_with_the_highest_share() -> None:
    result = unequal_borrowers(fair=True).cycle()
    assert result.preempted == ["team/b4"]


def test_classical_preemption_takes_the_most_recently_admitted_instead() -> None:
    result = unequal_borrowers(fair=False).cycle()
    assert result.preempted == ["team/c3"]
