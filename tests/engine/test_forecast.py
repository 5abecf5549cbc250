"""Estimated start times: the engine played forward on a copy, with learned or declared runtimes."""

from __future__ import annotations

import dataclasses

import pytest

from pykueue.api.governance import PreemptionCost
from pykueue.engine import forecast, lifecycle, runtimes

from .builders import LOWER_PRIORITY, SECOND, T0, Cluster, q

LQ = "team/a"
HOUR = 3600 * SECOND


def _cluster(now: float = 0) -> Cluster:
    c = Cluster().cq("a", {"f": {"cpu": q(4)}}, within=LOWER_PRIORITY)
    c.admitted("running", "a", cpu=4, admitted_at=0)
    c.pending("b", "a", cpu=2, created=1)
    c.pending("c", "a", cpu=2, created=2)
    c.pending("d", "a", cpu=4, created=3)
    c.state.now = T0 + round(now * SECOND)
    return c


def _model(*seconds: float) -> runtimes.Model:
    model = runtimes.Model()
    for value in seconds:
        model.learn(LQ, round(value * SECOND))
    return model


def _at(estimates: dict[str, forecast.Estimate], name: str) -> float:
    return (estimates[f"team/{name}"].at - T0) / SECOND


def test_queue_drains_in_order_with_learned_runtimes() -> None:
    c = _cluster(now=4)
    estimates = forecast.estimate(forecast.snapshot(c.state), _model(10, 10, 10))
    # The running workload has 6 s left; b and c fit together, d waits for both.
    assert (_at(estimates, "b"), _at(estimates, "c"), _at(estimates, "d")) == (10, 10, 20)
    assert estimates["team/b"].basis == "learned p50 of 3 finished in team/a"


def test_live_state_is_untouched() -> None:
    c = _cluster()
    before = (c.admitted_names(), c.pending_names("a"), c.state.now, c.state.cycle)
    forecast.estimate(forecast.snapshot(c.state), _model(10, 10, 10))
    assert (c.admitted_names(), c.pending_names("a"), c.state.now, c.state.cycle) == before
    assert c.wl("b").admission is None and "QuotaReserved" not in c.wl("b").conditions


def test_a_declared_limit_caps_what_was_learned() -> None:
    c = _cluster()
    model = _model(10, 10, 10)
    model.set_limit("team/b", 5)
    model.set_limit("team/c", 5)
    estimates = forecast.estimate(forecast.snapshot(c.state), model)
    assert _at(estimates, "d") == 15  # b and c are cut at 5 s, so d starts at 10 + 5
    # The basis is the running time that let each one in: the running one's learned time for
    # b, what was learned within b's declared limit for d.
    assert estimates["team/b"].basis == "learned p50 of 3 finished in team/a"
    assert (
        estimates["team/d"].basis == "learned p50 of 3 finished in team/a, within maximumExecutionTimeSeconds"
    )


def test_range_comes_from_the_percentiles() -> None:
    c = _cluster()
    estimates = forecast.estimate(forecast.snapshot(c.state), _model(2, 10, 30))
    b = estimates["team/b"]
    assert ((b.low - T0) / SECOND, (b.at - T0) / SECOND, (b.high - T0) / SECOND) == (2, 10, 30)


def test_a_running_workload_past_most_samples_is_expected_to_run_long() -> None:
    model = _model(2, 3, 4, 100)
    # Run 5 s: only the 100 s sample is longer, so 95 s are left.
    assert model.remaining("team/x", LQ, 5 * SECOND, "expected") == 95 * SECOND
    # Run longer than every sample: due now.
    assert model.remaining("team/x", LQ, 200 * SECOND, "expected") == 0


def test_without_samples_or_a_limit_the_running_time_is_unknown() -> None:
    model = runtimes.Model(runtimes.Settings(default_runtime=60 * SECOND))
    runtime = model.runtime("team/x", LQ)
    assert (runtime.expected, runtime.basis, runtime.known) == (60 * SECOND, runtimes.UNKNOWN_BASIS, False)
    model.learn("other/q", 7 * SECOND)
    model.learn("other/q", 7 * SECOND)
    model.learn("other/q", 7 * SECOND)
    # Too few in its own queue: every queue's samples.
    assert model.runtime("team/x", LQ).basis == "learned p50 of 3 finished in all queues"


def test_preemption_in_the_forward_run_is_played() -> None:
    c = Cluster().cq("a", {"f": {"cpu": q(4)}}, within=LOWER_PRIORITY)
    c.admitted("low", "a", cpu=4, priority=0)
    c.pending("high", "a", cpu=4, priority=10, created=1)
    c.pending("after", "a", cpu=4, priority=0, created=2)
    estimates = forecast.estimate(forecast.snapshot(c.state), _model(10, 10, 10))
    # "high" preempts "low" at once; "low" (older) then runs before "after".
    assert (_at(estimates, "high"), _at(estimates, "after")) == (0, 20)
    assert estimates["team/high"].basis == forecast.FITS_NOW


def test_a_workload_that_never_fits_gets_no_estimate() -> None:
    c = _cluster()
    c.pending("huge", "a", cpu=8, created=5)
    estimates = forecast.estimate(forecast.snapshot(c.state), _model(10, 10, 10))
    assert "team/huge" not in estimates and "team/d" in estimates


def test_a_snapshot_copies_every_field_and_owns_the_mutable_ones() -> None:
    c = _cluster()
    live = c.wl("b")
    live.set_condition("QuotaReserved", "False", "Pending", "waiting", T0)
    snap = forecast.snapshot(c.state)
    copied = next(wl for wl in snap.workloads if wl.key == live.key)
    for name in type(live).__slots__:
        assert getattr(copied, name) == getattr(live, name), name
    assert copied.conditions["QuotaReserved"].message == "waiting"
    copied.conditions["QuotaReserved"].message = "changed"
    copied.pod_sets.append(copied.pod_sets[0])
    assert live.conditions["QuotaReserved"].message == "waiting" and len(live.pod_sets) == 1


def _long_queue() -> Cluster:
    """One running workload and twelve pending ones that each need the whole queue."""
    c = Cluster().cq("a", {"f": {"cpu": q(4)}}, within=LOWER_PRIORITY)
    c.admitted("running", "a", cpu=4, admitted_at=0)
    for i in range(12):
        c.pending(f"p{i:02d}", "a", cpu=4, created=1 + i)
    return c


def test_a_cycle_budget_answers_for_the_soonest_starts_only() -> None:
    snap = forecast.snapshot(_long_queue().state)
    full = forecast.estimate(snap, _model(10, 10, 10))
    bounded = forecast.estimate(snap, _model(10, 10, 10), max_cycles=8)
    full_cycles, cycles = full.cycles, bounded.cycles
    assert len(full) == 12 and 0 < len(bounded) < len(full)
    # What the bounded run answers is what the whole run says of the same workloads, and
    # they are the soonest: none of those left out starts earlier.
    assert {key: full[key] for key in bounded} == bounded
    assert max(e.at for e in bounded.values()) <= min(full[k].at for k in full if k not in bounded)
    assert cycles < full_cycles


def test_the_expected_run_stops_at_its_budget() -> None:
    snap = forecast.snapshot(_long_queue().state)
    assert forecast.estimate(snap, _model(10, 10, 10), ranges=False, max_cycles=5).cycles == 5


def test_a_limit_is_an_upper_bound_and_the_share_used_is_learned() -> None:
    """Issue 44, item 1: a declared limit is not the running time. Nothing learned: anywhere
    up to the limit, half expected. Once workloads with limits finished, the share of their
    limits they used sets the expected time."""
    model = runtimes.Model()
    model.set_limit("team/x", 100)
    fresh = model.runtime("team/x", LQ)
    assert (fresh.low, fresh.expected, fresh.high) == (0, 50 * SECOND, 100 * SECOND)
    assert fresh.known and "upper bound" in fresh.basis
    for ran in (10, 20, 30):  # each declared 100 s and used a tenth to a third of it
        model.learn(LQ, ran * SECOND, limit=100 * SECOND)
    learned = model.runtime("team/x", LQ)
    assert (learned.low, learned.expected, learned.high) == (10 * SECOND, 20 * SECOND, 30 * SECOND)
    assert learned.basis.startswith("maximumExecutionTimeSeconds x 20%")
    # A running one that outlived what was expected of it ends before its limit.
    assert model.remaining("team/x", LQ, 60 * SECOND, "high") == 40 * SECOND
    assert model.remaining("team/x", LQ, 60 * SECOND, "expected") == 20 * SECOND


def _put_off_preemptor(settle: bool) -> Cluster:
    """A 2-GPU preemptor whose only victim would lose 8 hours of work its size: with
    ``maxLostWork: 1h, putOffFor: 1h`` (docs/governance.md) it waits until 3 h, then preempts."""
    c = Cluster().cq("pool", {"f": {"gpu": q(8)}}, within=LOWER_PRIORITY)
    spec = c.state.cluster_queues["pool"]
    policy = PreemptionCost(False, None, HOUR, HOUR)
    c.state.apply_cluster_queue(dataclasses.replace(spec, preemption_cost=policy))
    c.admitted("big", "pool", gpu=8, admitted_at=0)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "pool", gpu=2, priority=100, created=2 * 3600)
    if settle:
        c.settle()
        assert c.preempted_names() == set() and c.state.put_off.deadlines(c.state.now) == [T0 + 3 * HOUR]
    return c


@pytest.mark.parametrize("settle", [False, True], ids=["not-yet-tried", "parked"])
def test_a_put_off_preemptor_is_estimated_to_start_when_its_put_off_ends(settle: bool) -> None:
    c = _put_off_preemptor(settle)
    model = runtimes.Model()
    model.set_limit("team/big", 10 * 3600)  # its victim ends only at 10 h
    estimates = forecast.estimate(forecast.snapshot(c.state), model)
    urgent = estimates["team/urgent"]
    assert (urgent.at - T0, urgent.high - T0) == (3 * HOUR, 3 * HOUR)
    # Not "fits now": the start waits for the put-off, and says so.
    assert urgent.basis == forecast.PUT_OFF and urgent.known


def test_a_put_off_end_is_an_instant_even_after_another_deadline_has_passed() -> None:
    # The victim came back from an earlier preemption: 5.5 hours of its 8-hour limit are used,
    # so the engine's deadline for it is 02:30, while the model (which knows the declared limit
    # only) expects it to end at 04:00. The forward run does not deactivate workloads, so from
    # 02:30 on that deadline lies in its past; the put-off's end at 03:00 must still be an instant.
    c = _put_off_preemptor(settle=True)
    big = c.wl("big")
    big.max_execution_seconds, big.past_execution_seconds = 8 * 3600, 330 * 60
    big.set_condition("Admitted", "True", "Admitted", "The workload is admitted", T0)
    model = runtimes.Model()
    model.set_limit("team/big", 8 * 3600)
    assert model.remaining("team/big", "team/pool", 2 * HOUR, "expected") == 2 * HOUR
    estimates = forecast.estimate(forecast.snapshot(c.state), model)
    assert (estimates["team/urgent"].at - T0, estimates["team/urgent"].basis) == (3 * HOUR, forecast.PUT_OFF)
