"""A cycle that stops after ``max_admissions``: the best heads first, the rest untouched."""

from __future__ import annotations

import copy

from pykueue.engine import scheduler
from pykueue.engine.events import PENDING

from .builders import Cluster


def _three_teams() -> Cluster:
    c = Cluster()
    for name in ("a", "b", "c"):
        c.cq(name, {"f": {"cpu": 4}}, cohort="org")
    c.pending("low", "a", cpu=1, priority=1)
    c.pending("high", "b", cpu=1, priority=100)
    c.pending("mid", "c", cpu=1, priority=50)
    return c


def test_a_limited_cycle_admits_the_best_heads_and_leaves_the_rest_as_they_were() -> None:
    c = _three_teams()
    before = {name: copy.deepcopy(c.wl(name)) for name in ("low", "mid")}
    result = scheduler.run_cycle(c.state, max_admissions=1)
    assert result.admitted == ["team/high"]
    assert c.admitted_names() == {"high"}
    for name, was in before.items():
        now = c.wl(name)
        # Not tried: no explanation, no flavor remembered as tried, still at the head of its queue.
        assert now.conditions == was.conditions
        assert now.last_tried_flavor == was.last_tried_flavor
        assert (now.last_generation, now.last_cycle) == (was.last_generation, was.last_cycle)
    assert not [e for e in c.state.events if e.type == PENDING]
    queued = {q: [wl.name for wl in c.state.queues[q].active()] for q in ("a", "c")}
    assert queued == {"a": ["low"], "c": ["mid"]}

    assert scheduler.run_cycle(c.state, max_admissions=1).admitted == ["team/mid"]
    assert scheduler.run_cycle(c.state, max_admissions=1).admitted == ["team/low"]


def test_a_cycle_with_room_for_every_head_decides_as_an_unlimited_one() -> None:
    limited, unlimited = _three_teams(), _three_teams()
    assert scheduler.run_cycle(limited.state, max_admissions=3).admitted == (
        scheduler.run_cycle(unlimited.state).admitted
    )
    assert limited.admitted_names() == unlimited.admitted_names() == {"low", "mid", "high"}


def test_a_head_that_arrives_between_limited_cycles_goes_before_those_left_waiting() -> None:
    c = _three_teams()
    assert scheduler.run_cycle(c.state, max_admissions=1).admitted == ["team/high"]
    c.pending("urgent", "a", cpu=1, priority=200, created=1)
    assert scheduler.run_cycle(c.state, max_admissions=1).admitted == ["team/urgent"]
    assert c.admitted_names() == {"high", "urgent"}
