"""A cycle's fit checks look only at their own cohort tree (issue 46, item 3).

A head's fit check takes the targets of the preemptions issued earlier in the cycle out of
the tree and puts them back. Targets of other cohort trees cannot change what fits in this
one, and taking them all out made every check cost the cycle's preemptions so far: with
independent cohorts, a cycle's cost grew with the square of their number.
"""

from __future__ import annotations

import pytest

from pykueue.engine import scheduler
from pykueue.engine.specs import LOWER_PRIORITY

from .builders import Cluster


def _two_trees() -> Cluster:
    c = Cluster()
    c.cq("a", {"f": {"cpu": 4}}, cohort="left", within=LOWER_PRIORITY)
    c.cq("a2", {"f": {"cpu": 0}}, cohort="left")
    c.cq("b", {"f": {"cpu": 4}}, cohort="right")
    c.cq("b2", {"f": {"cpu": 0}}, cohort="right")
    c.admitted("low", "a", cpu=4, priority=1)
    c.pending("high", "a", cpu=4, priority=10)  # preempts "low" first in the cycle
    c.pending("other", "b", cpu=1, priority=0)  # then its fit check, in the other tree
    return c


def test_a_fit_check_shifts_no_target_of_another_cohort_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _two_trees()
    cohort_of = {name: cq.cohort for name, cq in c.state.cluster_queues.items()}
    fitting: list[str] = []
    foreign: list[tuple[str, str]] = []
    fits, shift = scheduler._Cycle._fits, scheduler._Cycle._shift

    def spy_fits(self: scheduler._Cycle, cq_name: str, *args: object) -> bool:
        fitting.append(cq_name)
        try:
            return fits(self, cq_name, *args)  # type: ignore[arg-type]
        finally:
            fitting.pop()

    def spy_shift(self: scheduler._Cycle, cq_name: str, *args: object) -> None:
        if fitting and cohort_of[cq_name] != cohort_of[fitting[-1]]:
            foreign.append((fitting[-1], cq_name))
        shift(self, cq_name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(scheduler._Cycle, "_fits", spy_fits)
    monkeypatch.setattr(scheduler._Cycle, "_shift", spy_shift)
    result = scheduler.run_cycle(c.state)
    assert result.preempted == ["team/low"]
    assert result.admitted == ["team/other"]
    assert foreign == []
