"""Issue 45, gap 2: while a preemption-cost policy keeps a preemptor from preempting, its
pending message says so: whose policy, how much work its victims would lose against
``maxLostWork`` and until when (or, with ``waitForEnd``, which declared ends it waits for),
and every view shows it under the cause ``policy`` (docs/governance.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from pykueue.api.governance import PreemptionCost
from pykueue.engine import lifecycle, pending_causes, put_offs
from pykueue.engine.specs import LOWER_PRIORITY
from pykueue.scenario import loader, runner
from pykueue.views import why

from .builders import SECOND, T0, Cluster, q

HOUR = 3600 * SECOND
SCENARIOS = Path(__file__).parents[1] / "scenarios" / "governance"
NO_ROOM = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"


def _run(name: str) -> dict[str, Any]:
    path = next(SCENARIOS.glob(f"{name}-*.yaml"))
    return runner.run(loader.parse(yaml.safe_load(path.read_text()), path.name))


def _quota_reserved(result: dict[str, Any], key: str) -> dict[str, str]:
    reserved: dict[str, str] = result["conditions"][key]["QuotaReserved"]
    return reserved


def test_a_put_off_preemption_says_whose_policy_how_much_and_until_when() -> None:
    result = _run("945")  # maxLostWork 1h, putOffFor 90m; urgent queued at 01:00
    waiting = _quota_reserved(result["checkpoints"][0], "default/urgent")
    assert (waiting["reason"], waiting["message"]) == (
        "WaitingForQuota",
        f"{NO_ROOM}; preemption put off by the preemption-cost policy of ClusterQueue pool: its victims "
        "would lose 8h of work this workload's size, more than maxLostWork 1h; it preempts at "
        "2026-01-01T02:30:00Z (putOffFor) unless quota frees first",
    )
    assert pending_causes.from_reason(waiting["reason"], waiting["message"]) == pending_causes.POLICY
    # Once the put-off has ended the preemptor runs: the words went with the decision.
    assert "default/urgent" in result["admitted"]
    assert "put off" not in str(result["conditions"])


def test_a_wait_for_declared_ends_says_so() -> None:
    waiting = _quota_reserved(_run("943")["checkpoints"][0], "default/urgent")
    assert waiting["message"] == (
        f"{NO_ROOM}; preemption waits, by the preemption-cost policy of ClusterQueue pool (waitForEnd 15m), "
        "for 1 workload(s) whose declared limit ends them by 2026-01-01T01:00:00Z"
    )


def test_a_wait_for_declared_ends_under_fair_sharing_says_so_too() -> None:
    waiting = _quota_reserved(_run("948")["checkpoints"][0], "serving/urgent")
    assert waiting["message"].endswith(
        "; preemption waits, by the preemption-cost policy of ClusterQueue serve (waitForEnd 15m), "
        "for 1 workload(s) whose declared limit ends them by 2026-01-01T01:00:00Z"
    )


def _put_off(cohort_policy: bool) -> Cluster:
    """A 2-GPU preemptor whose victim (8 GPUs, 2 hours in) would lose 8 hours of its size."""
    policy = PreemptionCost(False, None, HOUR, HOUR)
    c = Cluster().cohort("org")
    c.cq("pool", {"f": {"gpu": q(8)}}, within=LOWER_PRIORITY, cohort="org")
    if cohort_policy:
        c.state.apply_cohort(dataclasses.replace(c.state.cohorts["org"], preemption_cost=policy))
    else:
        spec = c.state.cluster_queues["pool"]
        c.state.apply_cluster_queue(dataclasses.replace(spec, preemption_cost=policy))
    c.admitted("big", "pool", gpu=8, admitted_at=0)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "pool", gpu=2, priority=100, created=2 * 3600)
    c.settle()
    assert c.preempted_names() == set()
    return c


def test_a_cohorts_policy_is_named_as_the_cohorts() -> None:
    _, _, message = _put_off(cohort_policy=True).condition("urgent", "QuotaReserved")
    assert "preemption put off by the preemption-cost policy of Cohort org:" in message
    assert "would lose 8h of work this workload's size, more than maxLostWork 1h" in message
    assert "it preempts at 2026-01-01T03:00:00Z" in message


def test_describe_and_the_dashboard_show_it_under_the_policy_cause() -> None:
    c = _put_off(cohort_policy=False)
    wl = c.wl("urgent")
    assert pending_causes.cause_of(c.state, wl) == pending_causes.POLICY
    said = why.reasons(c.state, wl, {})
    assert [cause for cause, _ in said] == [pending_causes.POLICY]
    assert "put off by the preemption-cost policy of ClusterQueue pool" in said[0][1]


def test_a_reason_is_only_added_in_the_cycle_that_gave_it() -> None:
    kept = put_offs.PutOffs()
    kept.explain("ns/a", 7, "preemption put off")
    assert kept.explained("ns/a", 7, "no room") == "no room; preemption put off"
    assert kept.explained("ns/b", 7, "no room") == "no room"
    assert kept.explained("ns/a", 8, "no room") == "no room"
    kept.explain("ns/b", 8, "waits")  # a new cycle forgets the last one's words
    assert kept.explained("ns/a", 8, "") == ""
    assert put_offs.duration_text(90 * 60 * SECOND) == "1h30m"
