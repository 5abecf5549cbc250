"""Classical preemption: which workloads go, and which the policies protect."""

from __future__ import annotations

import pytest

from pykueue.engine.events import PREEMPTED

from .builders import ANY, LOWER_OR_NEWER_EQUAL, LOWER_PRIORITY, NEVER, SECOND, T0, Cluster, podset


def test_minimal_set_spares_lower_priority_workloads_that_are_not_needed() -> None:
    """Removing the two lowest first frees only 4; the 6-cpu one alone is enough, so only it goes."""
    c = (
        Cluster()
        .cq("cq", {"f": {"cpu": 10}}, within=LOWER_PRIORITY)
        .admitted("low-2", "cq", cpu=2, priority=1)
        .admitted("mid-2", "cq", cpu=2, priority=2)
        .admitted("big-6", "cq", cpu=6, priority=3)
        .pending("preemptor", "cq", cpu=6, priority=10)
    )
    result = c.cycle()
    assert result.preempted == ["team/big-6"]
    assert result.admitted == [], "the preemptor waits for its targets to go"
    assert c.admitted_names() == {"low-2", "mid-2"}
    c.cycle()
    assert c.admitted_names() == {"low-2", "mid-2", "preemptor"}


def test_preempts_several_when_one_is_not_enough_and_only_as_many_as_needed() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 6}}, within=LOWER_PRIORITY)
    for i in range(6):
        c.admitted(f"w{i}", "cq", cpu=1, priority=1, admitted_at=i)
    c.pending("preemptor", "cq", cpu=3, priority=2)
    result = c.cycle()
    # Equal priority: the most recently admitted go first.
    assert sorted(result.preempted) == ["team/w3", "team/w4", "team/w5"]


def test_free_quota_is_used_before_preempting() -> None:
    c = (
        Cluster()
        .cq("cq", {"f": {"cpu": 6}}, within=LOWER_PRIORITY)
        .admitted("a", "cq", cpu=2, priority=0)
        .admitted("b", "cq", cpu=2, priority=0, admitted_at=1)
        .pending("preemptor", "cq", cpu=4, priority=1)
    )
    result = c.cycle()
    assert result.preempted == ["team/b"]


@pytest.mark.parametrize(
    ("policy", "preemptor_priority", "preemptor_created", "preempts"),
    [
        (LOWER_PRIORITY, 2, 20, True),
        (LOWER_PRIORITY, 1, 5, False),  # equal priority is protected under LowerPriority
        (LOWER_OR_NEWER_EQUAL, 1, 5, True),  # the target is newer than the preemptor
        (LOWER_OR_NEWER_EQUAL, 1, 20, False),  # the target is older than the preemptor
        (LOWER_OR_NEWER_EQUAL, 0, 5, False),  # a higher-priority target is protected
        (NEVER, 5, 5, False),
    ],
)
def test_within_cluster_queue_policy(
    policy: str, preemptor_priority: int, preemptor_created: float, preempts: bool
) -> None:
    c = (
        Cluster()
        .cq("cq", {"f": {"cpu": 4}}, within=policy)
        .admitted("target", "cq", cpu=4, priority=1, created=10)
        .pending("preemptor", "cq", cpu=4, priority=preemptor_priority, created=preemptor_created)
    )
    result = c.cycle()
    assert result.preempted == (["team/target"] if preempts else [])
    assert c.admitted_names() == {"target"}.difference({"target"} if preempts else set())


def test_preempted_workload_is_requeued_with_conditions_and_event_naming_the_preemptor() -> None:
    c = (
        Cluster()
        .cq("cq", {"f": {"cpu": 4}}, within=LOWER_PRIORITY)
        .admitted("victim", "cq", cpu=4, priority=0)
        .pending("preemptor", "cq", cpu=4, priority=3)
    )
    c.cycle()
    victim = c.wl("victim")
    assert victim.admission is None
    assert c.condition("victim", "Evicted")[:2] == ("True", "Preempted")
    assert c.condition("victim", "Preempted")[:2] == ("True", "InClusterQueue")
    assert c.condition("victim", "QuotaReserved")[0] == "False"
    assert "victim" in c.pending_names("cq") | c.inadmissible_names("cq")
    events = [e for e in c.state.events if e.type == PREEMPTED]
    assert [e.workload for e in events] == ["team/victim"]
    assert "team/preemptor" in events[0].message
    assert c.state.cq_usage["cq"].get(("f", "cpu"), 0) == 0


def reclaim_cluster(policy: str, borrower_priority: int) -> Cluster:
    """b borrows a's idle quota; then a wants its nominal back."""
    return (
        Cluster()
        .cq("a", {"f": {"cpu": 4}}, cohort="co", reclaim=policy)
        .cq("b", {"f": {"cpu": 2}}, cohort="co")
        .admitted("b-own", "b", cpu=2, priority=borrower_priority)
        .admitted("b-borrowed", "b", cpu=3, priority=borrower_priority, admitted_at=1)
        .pending("a-wants", "a", cpu=4, priority=1)
    )


@pytest.mark.parametrize(
    ("policy", "borrower_priority", "reclaims"),
    [(ANY, 5, True), (LOWER_PRIORITY, 0, True), (LOWER_PRIORITY, 5, False), (NEVER, 0, False)],
)
def test_reclaim_within_cohort_policy(policy: str, borrower_priority: int, reclaims: bool) -> None:
    c = reclaim_cluster(policy, borrower_priority)
    result = c.cycle()
    # Only the newest of b's workloads needs to go: b's own 2 are within its nominal.
    assert result.preempted == (["team/b-borrowed"] if reclaims else [])


def test_reclaim_never_takes_from_a_queue_within_its_nominal() -> None:
    c = (
        Cluster()
        .cq("a", {"f": {"cpu": 4}}, cohort="co", reclaim=ANY, within=LOWER_PRIORITY)
        .cq("b", {"f": {"cpu": 4}}, cohort="co")
        .admitted("b-own", "b", cpu=4, priority=0)
        .admitted("a-own", "a", cpu=2, priority=0)
        .pending("a-wants", "a", cpu=4, priority=5)
    )
    result = c.cycle()
    assert result.preempted == ["team/a-own"]


@pytest.mark.parametrize(
    ("borrow_within", "threshold", "preempts"),
    [
        (LOWER_PRIORITY, None, True),
        (LOWER_PRIORITY, 2, True),  # the target's priority is not above the threshold
        (LOWER_PRIORITY, 1, False),  # the target's priority is above the threshold
        (NEVER, None, False),  # a borrowing preemptor may not reclaim
    ],
)
def test_borrow_within_cohort_lets_a_borrowing_preemptor_take_from_borrowers(
    borrow_within: str, threshold: int | None, preempts: bool
) -> None:
    c = (
        Cluster()
        .cq(
            "a", {"f": {"cpu": 1}}, cohort="co", reclaim=ANY, borrow_within=borrow_within, threshold=threshold
        )
        .cq("b", {"f": {"cpu": 2}}, cohort="co")
        .cq("lender", {"f": {"cpu": 4}}, cohort="co")
        .admitted("b-borrows", "b", cpu=5, priority=2)
        .pending("a-borrows", "a", cpu=4, priority=5)
    )
    assert c.cycle().preempted == (["team/b-borrows"] if preempts else [])


@pytest.mark.parametrize(
    ("fair", "preemptor_created"),
    [
        pytest.param(True, 10, id="fair-sharing"),
        pytest.param(False, 60, id="classical-eviction-at-the-preemptors-creation-time"),
    ],
)
def test_a_partially_admissible_preemptor_does_not_preempt_the_same_workload_forever(
    fair: bool, preemptor_created: float
) -> None:
    """Regression: it used to preempt, re-admit the victim, preempt again, forever.

    b's workload (2 pods of 2 cpus, minCount 1) cannot have its 4 cpus by reclaiming,
    so it is reduced to 1 pod and preempts a's borrower. Next cycle the full 4 cpus
    fit again (by borrowing a's idle quota), so it asks for all of them; the victim,
    back in its queue, is ordered first (under fair sharing its share after admission
    is lower; classically its eviction time ties the preemptor's creation and its
    arrival order wins), is admitted, and the preemptor "no longer fits". The cycle
    after, the preemptor is reduced again and preempts the same workload again.
    """
    c = (
        Cluster(fair_sharing=fair)
        .cq("a", {"f": {"cpu": 2}}, cohort="co")
        .cq("b", {"f": {"cpu": 2}}, cohort="co", reclaim=ANY)
        .admitted("a-borrows", "a", cpu=3)
        .pending("b-wants", "b", pod_sets=[podset(count=2, min_count=1, cpu=2)], created=preemptor_created)
    )
    c.state.now = T0 + 60 * SECOND
    c.cycle(6)
    preemptions = [key for r in c.results for key in r.preempted]
    assert preemptions == ["team/a-borrows"], f"preempted again and again: {preemptions}"
    assert "b-wants" in c.admitted_names()
