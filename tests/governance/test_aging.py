"""Aging in the engine: the aged priority is deterministic from state.now, kept while admitted,
restarted by an eviction, explained in words (what `describe` shows), and free when off."""

from __future__ import annotations

from pathlib import Path

from pykueue.engine import aging, lifecycle, loading, scheduler
from pykueue.engine.state import State
from pykueue.scenario import loader

SCENARIOS = Path(__file__).parents[1] / "scenarios" / "governance"
MINUTE = 60 * 10**6


def _state(name: str) -> State:
    scenario = loader.load(SCENARIOS / name)
    state = State(config=scenario.config)
    state.now = scenario.now
    for obj in scenario.objects:
        loading.apply(state, obj)
    return state


def _settle(state: State) -> None:
    for _ in range(50):
        if not scheduler.run_cycle(state).changed:
            return


def test_aged_priority_follows_the_clock_and_keeps_counting_while_admitted() -> None:
    state = _state("911-aging-lets-a-starved-workload-preempt.yaml")
    big = state.workloads["default/big"]
    _settle(state)
    assert (big.priority, big.aged) == (0, 0)
    lifecycle.advance(state, state.now + MINUTE)  # `big` waited 2 minutes: 1 point; the others 0
    scheduler.run_cycle(state)
    assert (big.priority, big.aged) == (1, 1)
    assert aging.explain(state, big) == "priority 1 = 0 + 1 aged waiting (1 per 120s of wait, at most 60)"
    _settle(state)
    assert big.admission is not None
    lifecycle.advance(state, state.now + 30 * MINUTE)
    _settle(state)
    # Admitted, it keeps aging from its creation (32 minutes ago), so the four it preempted,
    # which restarted their wait at their eviction (30 minutes ago), never preempt it back.
    assert big.admission is not None and big.priority == 16
    assert "since its creation, admitted" in aging.explain(state, big)
    small = state.workloads["default/small-1"]
    assert small.admission is None and small.aged == 15
    assert [e.workload for e in state.events if e.type == "Preempted"] == [
        f"default/small-{i}" for i in range(1, 5)
    ]


def test_the_same_inputs_give_the_same_priorities() -> None:
    runs = []
    for _ in range(2):
        state = _state("911-aging-lets-a-starved-workload-preempt.yaml")
        for minutes in (1, 2, 7, 61):
            lifecycle.advance(state, state.now + minutes * MINUTE)
            _settle(state)
        runs.append(sorted((key, wl.priority, wl.aged) for key, wl in state.workloads.items()))
    assert runs[0] == runs[1]
    assert all(aged <= 60 for _, _, aged in runs[0])  # the cap


def test_without_a_policy_nothing_ages_and_nothing_is_looked_at() -> None:
    state = _state("912-aging-off-the-starved-workload-waits.yaml")
    lifecycle.advance(state, state.now + 600 * MINUTE)
    _settle(state)
    assert all(wl.aged == 0 for wl in state.workloads.values())
    assert state.aged_queues == set()
    assert aging.explain(state, state.workloads["default/big"]) == ""


def test_removing_the_policy_takes_the_aging_back() -> None:
    state = _state("913-aging-orders-the-queue.yaml")
    lifecycle.advance(state, state.now + 5 * MINUTE)
    scheduler.run_cycle(state)
    old = state.workloads["default/old"]
    assert old.aged == 5  # 1 point a minute
    cq = state.cluster_queues["pool"]
    state.apply_cluster_queue(type(cq)(**{**{f: getattr(cq, f) for f in cq.__slots__}, "aging": None}))
    scheduler.run_cycle(state)
    assert (old.priority, old.aged) == (0, 0)
