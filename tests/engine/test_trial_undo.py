"""A preemption search undoes its trial removals on the live usage tree, even when it fails midway."""

from __future__ import annotations

import pytest

from pykueue.engine.preemption import Preemptor

from .builders import ANY, LOWER_PRIORITY, Cluster


class Boom(Exception):
    pass


def _usage(c: Cluster) -> dict[str, dict[tuple[str, str], int]]:
    return {name: dict(node.usage) for name, node in c.state.nodes.items()}


def _failing_after(calls: int) -> object:
    """A topology check that answers ``calls`` times, then fails as a bug in it would."""
    count = {"n": 0}

    def fits() -> bool:
        count["n"] += 1
        if count["n"] > calls:
            raise Boom
        return False

    return fits


@pytest.mark.parametrize("fair_sharing", [False, True], ids=["classical", "fair-sharing"])
@pytest.mark.parametrize("calls", [0, 1, 2])
def test_an_exception_in_the_search_leaves_the_usage_as_it_was(fair_sharing: bool, calls: int) -> None:
    c = (
        Cluster(fair_sharing=fair_sharing)
        .cohort("co")
        .cq("cq", {"f": {"cpu": 4}}, cohort="co", within=LOWER_PRIORITY, reclaim=ANY)
        .cq("other", {"f": {"cpu": 0}}, cohort="co")
        .admitted("low-1", "cq", cpu=1, priority=1)
        .admitted("low-2", "cq", cpu=1, priority=1, admitted_at=1)
        .admitted("lent", "other", cpu=2, priority=1)
        .pending("preemptor", "cq", cpu=4, priority=10)
    )
    c.state.ensure_tree()
    before = _usage(c)
    preemptor = Preemptor(c.state)
    preemptor.tas_fits = _failing_after(calls)  # type: ignore[assignment]
    wl = c.state.workloads["team/preemptor"]
    with pytest.raises(Boom):
        preemptor.simulate("cq", wl, ("f", "cpu"), 4)
    assert _usage(c) == before
    # And the engine goes on: without the faulty check, the same search finds its targets.
    preemptor.tas_fits = None
    possibility, _ = preemptor.simulate("cq", wl, ("f", "cpu"), 4)
    assert possibility.name != "NO_CANDIDATES"
    assert _usage(c) == before
