"""The rollback what-if: the same future played with the current and with changed policies."""

from __future__ import annotations

from typing import Any

from pykueue.api import manifests
from pykueue.engine import forecast, policy_whatif, runtimes

from .builders import LOWER_PRIORITY, SECOND, T0, Cluster, q

HOUR = 3600 * SECOND


def _cq(cpu: int, stop: str = "None") -> Any:
    return manifests.parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "a"},
            "spec": {
                "namespaceSelector": {},
                "stopPolicy": stop,
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                    }
                ],
            },
        }
    )


def _cluster() -> Cluster:
    c = Cluster().cq("a", {"f": {"cpu": q(4)}}, within=LOWER_PRIORITY)
    c.admitted("running", "a", cpu=4, admitted_at=0)
    c.pending("small", "a", cpu=2, created=1)
    c.pending("urgent", "a", cpu=4, created=2, priority=10)
    c.state.now = T0
    return c


def _model() -> runtimes.Model:
    model = runtimes.Model()
    for _ in range(3):
        model.learn("team/a", 600 * SECOND)
    return model


def test_more_quota_admits_at_once_what_waited() -> None:
    c = _cluster()
    changes = [("ClusterQueue", "", "a", _cq(10))]
    found = policy_whatif.compare(forecast.snapshot(c.state), _model(), changes, HOUR)
    by_name = {d.workload: d for d in found}
    # Today the urgent one preempts the running one at once, and small waits for urgent
    # (10 minutes) and then for the preempted one, queued before it (10 more); with 10 CPUs
    # both fit beside the running one.
    assert by_name["team/running"].now == "preempted now"
    assert by_name["team/running"].after == "keeps running (not preempted within 1h00m)"
    assert by_name["team/small"].now == "admitted in 20m00s"
    assert by_name["team/small"].after == "admitted now"
    assert by_name["team/small"].queue == "team/a"
    assert "team/urgent" not in by_name  # admitted at once either way


def test_no_change_no_difference_and_the_live_state_is_untouched() -> None:
    c = _cluster()
    before = (c.admitted_names(), c.pending_names("a"), c.state.now)
    assert policy_whatif.compare(forecast.snapshot(c.state), _model(), [], HOUR) == []
    assert (c.admitted_names(), c.pending_names("a"), c.state.now) == before


def test_a_stop_that_drains_evicts_at_once_and_a_deleted_queue_admits_nothing() -> None:
    alone = Cluster().cq("a", {"f": {"cpu": q(4)}}, within=LOWER_PRIORITY)
    alone.admitted("running", "a", cpu=4, admitted_at=0)
    alone.state.now = T0
    drain = [("ClusterQueue", "", "a", _cq(4, "HoldAndDrain"))]
    drained = policy_whatif.compare(forecast.snapshot(alone.state), _model(), drain, HOUR)
    assert [(d.workload, d.now, d.after) for d in drained] == [
        ("team/running", "keeps running (not preempted within 1h00m)", "preempted now")
    ]
    c = _cluster()
    gone = policy_whatif.compare(
        forecast.snapshot(c.state), _model(), [("LocalQueue", "team", "a", None)], HOUR
    )
    after = {d.workload: d.after for d in gone}
    assert after["team/small"] == after["team/urgent"] == "not admitted within 1h00m"
