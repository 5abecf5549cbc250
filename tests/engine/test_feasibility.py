"""Can this ever run? (engine/feasibility.py): never by the quota design, against not now by
the usage, with the numbers; and the views say the same (views/why.py, pending_causes)."""

from __future__ import annotations

from pykueue.engine import feasibility, pending_causes
from pykueue.views import why

from .builders import Cluster, podset, q, workload


def _team_cohort() -> Cluster:
    """Two teams of 16 GPUs in one cohort; `b` keeps its quota busy with 15 GPUs."""
    c = Cluster()
    c.cq("a", {"h100": {"gpu": q(16)}}, cohort="co")
    c.cq("b", {"h100": {"gpu": q(16)}}, cohort="co")
    c.admitted("small", "b", gpu=15)
    return c


def _verdict(c: Cluster, name: str) -> feasibility.Verdict | None:
    return feasibility.of(c.state, c.wl(name))


def test_more_than_the_cohort_can_ever_give_never_fits() -> None:
    c = Cluster()
    c.cq("a", {"h100": {"gpu": q(16, borrow=8)}}, cohort="co")
    c.cq("b", {"h100": {"gpu": q(16, lend=4)}}, cohort="co")
    c.pending("huge", "a", gpu=32)
    c.settle()
    verdict = _verdict(c, "huge")
    assert verdict is not None and verdict.never
    # 16 own + at most 4 lent by b's lendingLimit (its borrowingLimit of 8 is not reached)
    assert (verdict.needed, verdict.nominal, verdict.most) == (32000, 16000, 20000)
    assert verdict.sentence.startswith("never fits: needs 32 gpu in flavor h100")
    assert "can never use more than 20" in verdict.sentence
    assert pending_causes.cause_of(c.state, c.wl("huge")) == pending_causes.CAPACITY


def test_borrowing_what_other_teams_use_is_not_now_with_the_numbers() -> None:
    c = _team_cohort()
    c.pending("big", "a", gpu=24)
    c.settle()
    verdict = _verdict(c, "big")
    assert verdict is not None and verdict.kind == feasibility.BEYOND_NOMINAL
    assert (verdict.needed, verdict.nominal, verdict.most, verdict.free) == (24000, 16000, 32000, 17000)
    assert "8 more than ClusterQueue a's nominal 16" in verdict.sentence
    assert "they use 15 of their 16 now" in verdict.sentence
    assert "runs when 7 more is idle at once" in verdict.sentence
    assert pending_causes.cause_of(c.state, c.wl("big")) == pending_causes.QUOTA
    reasons = why.reasons(c.state, c.wl("big"), {})
    assert (pending_causes.QUOTA, verdict.sentence) in reasons


def test_within_its_nominal_it_waits_for_its_own_quota() -> None:
    c = Cluster()
    c.cq("a", {"h100": {"gpu": q(16)}})
    c.admitted("running", "a", gpu=12)
    c.pending("next", "a", gpu=8)
    c.settle()
    verdict = _verdict(c, "next")
    assert verdict is not None and verdict.kind == feasibility.WITHIN_NOMINAL
    assert "could fit when 4 more frees" in verdict.sentence


def test_no_single_flavor_holds_both_resources_never_fits() -> None:
    """Upstream only says it waits for quota: each resource fits in some flavor, no flavor both."""
    c = Cluster()
    c.cq("a", {"x": {"cpu": q(8), "gpu": q(1)}, "y": {"cpu": q(1), "gpu": q(8)}})
    c.state.add_workload(workload("both", "a", pod_sets=[podset(cpu=4, gpu=4)]))
    c.settle()
    verdict = _verdict(c, "both")
    assert verdict is not None and verdict.never
    assert pending_causes.cause_of(c.state, c.wl("both")) == pending_causes.CAPACITY


def test_by_design_a_job_beyond_its_nominal_is_named_even_on_an_idle_cluster() -> None:
    c = Cluster()
    c.cq("a", {"h100": {"gpu": q(16)}}, cohort="co")
    c.cq("b", {"h100": {"gpu": q(16)}}, cohort="co")
    c.state.ensure_tree()
    big = workload("big", "a", gpu=24)
    small = workload("small", "a", gpu=8)
    cq, node = c.state.cluster_queues["a"], c.state.nodes["a"]
    assert feasibility.analyse(cq, node, big) is None  # fits now: everything is idle
    verdict = feasibility.analyse(cq, node, big, design=True)
    assert verdict is not None and verdict.kind == feasibility.BEYOND_NOMINAL
    assert verdict.sentence.startswith("by design: needs 24 gpu in flavor h100, 8 more")
    assert feasibility.analyse(cq, node, small, design=True) is None


def test_a_workload_that_fits_now_has_no_verdict() -> None:
    c = Cluster()
    c.cq("a", {"h100": {"gpu": q(16)}})
    c.pending("fits", "a", gpu=8)
    assert _verdict(c, "fits") is None
