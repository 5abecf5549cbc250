"""The lifecycle API a controller calls: evictions in two halves, checks, pods ready, time.

Each test drives the engine the way a controller would (`pykueue.engine.lifecycle`,
`State.complete_eviction`) and reads back what the controller would write.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pykueue.engine import lifecycle, pods_ready
from pykueue.engine.config import WaitForPodsReady
from pykueue.engine.events import CHECKS_PASSED, EVICTED, PODS_READY

from .builders import ANY, LOWER_PRIORITY, SECOND, Cluster

MINUTE = 60 * SECOND


# ------------------------------------------------------------- async evictions


def _stealing_cohort() -> Cluster:
    """Upstream's "prevent other workloads from stealing quota" cohort, evictions reported."""
    c = Cluster(async_evictions=True, gates={"PrioritizePreemptorWorkloads": True})
    c.cq(
        "alpha",
        {"one": {"cpu": 2}},
        cohort="all",
        within=LOWER_PRIORITY,
        reclaim=ANY,
        borrow_within=LOWER_PRIORITY,
    )
    c.cq("beta", {"one": {"cpu": 1}}, cohort="all", within=LOWER_PRIORITY, reclaim=LOWER_PRIORITY)
    c.cq("gamma", {"one": {"cpu": 1}}, cohort="all", within=LOWER_PRIORITY, reclaim=LOWER_PRIORITY)
    c.admitted("wl-a", "alpha", cpu=1, priority=50)
    c.admitted("wl-b", "beta", cpu=3, priority=50, admitted_at=1)
    c.pending("wl-c", "gamma", cpu=1, priority=10, created=2)
    c.settle()
    c.pending("preemptor", "alpha", cpu=4, priority=100, created=3)
    return c


def test_an_eviction_keeps_the_quota_until_the_controller_reports_the_job_stopped() -> None:
    c = _stealing_cohort()
    c.cycle()
    a, b = c.wl("wl-a"), c.wl("wl-b")
    assert a.eviction is not None and b.eviction is not None
    assert a.admission is not None and b.admission is not None, "still holding their quota"
    assert c.condition("wl-a", "Evicted")[:2] == ("True", "Preempted")
    assert c.state.cq_usage["beta"][("one", "cpu")] == 3000
    status, reason, message = c.condition("preemptor", "QuotaReserved")
    assert (status, reason) == ("False", "WaitingForPreemptedWorkloads")
    assert message.endswith("Pending the preemption of 2 workload(s)")


def test_the_waiting_preemptor_keeps_what_each_finished_eviction_frees() -> None:
    c = _stealing_cohort()
    c.cycle()
    c.state.complete_eviction("team/wl-b")
    assert c.wl("wl-b").admission is None
    for _ in range(3):
        result = c.cycle()
        assert "team/wl-c" not in result.admitted, "wl-c took the quota the preemptor waits for"
        assert result.preempted == [], "a target already being evicted is not evicted again"
    assert c.wl("preemptor").admission is None
    assert c.condition("preemptor", "QuotaReserved")[1] == "WaitingForPreemptedWorkloads"
    c.state.complete_eviction("team/wl-a")
    c.cycle()
    assert c.wl("preemptor").admission is not None
    c.settle()
    assert c.wl("wl-c").admission is None


def test_complete_eviction_of_a_workload_not_being_evicted_does_nothing() -> None:
    c = Cluster(async_evictions=True).cq("cq", {"f": {"cpu": 2}}).admitted("run", "cq", cpu=1)
    c.state.complete_eviction("team/run")
    c.state.complete_eviction("team/unknown")
    assert c.wl("run").admission is not None
    assert c.state.cq_usage["cq"][("f", "cpu")] == 1000


def test_a_completed_eviction_writes_upstreams_requeue_conditions() -> None:
    c = Cluster(async_evictions=True).cq("cq", {"f": {"cpu": 2}}, within=LOWER_PRIORITY)
    c.admitted("low", "cq", cpu=2)
    c.pending("high", "cq", cpu=2, priority=10)
    c.cycle()
    c.state.complete_eviction("team/low")
    assert c.condition("low", "Requeued")[:2] == ("True", "Preempted")
    assert c.condition("low", "QuotaReserved")[:2] == ("False", "PendingEvaluation")
    assert c.condition("low", "Admitted")[:2] == ("False", "NoReservation")
    assert c.wl("low").eviction_counts == {("Preempted", ""): 1}


# --------------------------------------------------------------------- checks


def test_checks_ready_admit_and_say_how_long_the_reservation_waited() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 2}}, checks=("prov",)).pending("w", "cq", cpu=1)
    c.cycle()
    assert c.condition("w", "Admitted")[:2] == ("False", "UnsatisfiedAdmissionChecks")
    assert list(c.wl("w").checks) == ["prov"]
    c.state.now += 30 * SECOND
    lifecycle.report_check(c.state, "team/w", "prov", "Ready", "provisioned")
    assert c.condition("w", "Admitted") == ("True", "Admitted", "The workload is admitted")
    passed = [e for e in c.state.events if e.type == CHECKS_PASSED]
    assert [(e.workload, e.waited) for e in passed] == [("team/w", 30 * SECOND)]
    assert c.wl("w").checks["prov"].message == "provisioned"
    assert "team/w" in c.state.touched


def test_a_rejected_check_deactivates_and_names_the_cause_for_the_metrics() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 2}}, checks=("prov",)).pending("w", "cq", cpu=1)
    c.cycle()
    lifecycle.report_check(c.state, "team/w", "prov", "Rejected")
    wl = c.wl("w")
    assert not wl.active and wl.admission is None
    evicted = [e for e in c.state.events if e.type == EVICTED]
    assert [(e.reason, e.underlying_cause, e.cluster_queue) for e in evicted] == [
        ("Deactivated", "AdmissionCheck", "cq")
    ]
    assert c.condition("w", "Evicted")[1] == "DeactivatedDueToAdmissionCheck"
    assert wl.checks["prov"].state == "Pending"


def test_a_retry_check_with_a_delay_sets_requeue_at_without_counting() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 2}}, checks=("prov",)).pending("w", "cq", cpu=1)
    c.cycle()
    lifecycle.report_check(c.state, "team/w", "prov", "Retry", requeue_after_seconds=90)
    wl = c.wl("w")
    assert wl.admission is None
    assert wl.requeue_at == c.state.now + 90 * SECOND and wl.requeue_count == 0
    assert wl.checks["prov"].retry_count == 1
    assert lifecycle.next_deadline(c.state) == wl.requeue_at
    c.cycle()
    assert wl.admission is None, "backing off"
    lifecycle.advance(c.state, wl.requeue_at)
    c.cycle()
    assert wl.admission is not None


def test_report_check_refuses_unknown_states_and_workloads() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 2}}, checks=("prov",)).pending("w", "cq", cpu=1)
    with pytest.raises(ValueError, match="Approved"):
        lifecycle.report_check(c.state, "team/w", "prov", "Approved")
    with pytest.raises(KeyError):
        lifecycle.report_check(c.state, "team/nobody", "prov", "Ready")


# ----------------------------------------------------------------- pods ready


def _podsready(**kwargs: object) -> Cluster:
    config = WaitForPodsReady(timeout=5 * MINUTE, recovery_timeout=2 * MINUTE, **kwargs)  # type: ignore[arg-type]
    return Cluster(wait_for_pods_ready=config)


def test_pods_ready_is_reported_once_with_the_wait_since_admission() -> None:
    c = _podsready().cq("cq", {"f": {"cpu": 2}}).pending("w", "cq", cpu=1)
    c.cycle()
    assert c.state.pods_not_ready == {"team/w"}
    c.state.now += 40 * SECOND
    lifecycle.report_pods_ready(c.state, "team/w", True)
    lifecycle.report_pods_ready(c.state, "team/w", True)
    ready = [e for e in c.state.events if e.type == PODS_READY]
    assert [(e.reason, e.waited) for e in ready] == [("Started", 40 * SECOND)]
    assert c.state.pods_not_ready == set()
    lifecycle.report_pods_ready(c.state, "team/w", False)
    assert c.state.pods_not_ready == {"team/w"}
    assert c.condition("w", "PodsReady")[1] == "WaitForRecovery"


def test_timeouts_fire_in_time_order_each_at_its_own_time() -> None:
    c = _podsready(backoff_base_seconds=10).cq("cq", {"f": {"cpu": 4}})
    c.pending("early", "cq", cpu=1)
    c.cycle()
    c.state.now += MINUTE
    c.pending("late", "cq", cpu=1)
    c.cycle()
    early, late = c.wl("early"), c.wl("late")
    early_admitted = early.conditions["Admitted"].last_transition
    assert lifecycle.next_deadline(c.state) == early_admitted + 5 * MINUTE
    lifecycle.advance(c.state, early_admitted + 5 * MINUTE + 5 * SECOND)
    assert early.requeue_at == early_admitted + 5 * MINUTE + 10 * SECOND, "evicted at its deadline"
    assert late.admission is not None
    lifecycle.advance(c.state, c.state.now + 10 * MINUTE)
    evicted = [e for e in c.state.events if e.type == EVICTED]
    assert [(e.workload, e.reason, e.underlying_cause) for e in evicted] == [
        ("team/early", "PodsReadyTimeout", "WaitForStart"),
        ("team/late", "PodsReadyTimeout", "WaitForStart"),
    ]
    assert late.conditions["Evicted"].last_transition - early.conditions["Evicted"].last_transition == MINUTE
    # Both backoffs ended within the advance: back in the queue, requeueAt cleared, counted once.
    assert c.pending_names("cq") == {"early", "late"}
    assert (early.requeue_at, early.requeue_count) == (None, 1)


def test_the_recovery_timeout_counts_from_the_loss_of_readiness() -> None:
    c = _podsready().cq("cq", {"f": {"cpu": 2}}).pending("w", "cq", cpu=1)
    c.cycle()
    lifecycle.report_pods_ready(c.state, "team/w", True)
    lifecycle.advance(c.state, c.state.now + 30 * MINUTE)
    lifecycle.report_pods_ready(c.state, "team/w", False)
    lost = c.state.now
    assert lifecycle.next_deadline(c.state) == lost + 2 * MINUTE
    lifecycle.advance(c.state, lost + 2 * MINUTE)
    event = next(e for e in c.state.events if e.type == EVICTED)
    assert event.underlying_cause == "WaitForRecovery"
    assert event.waited is None, "the pods were not ready when it was evicted"


def test_an_eviction_says_how_long_the_pods_had_been_ready() -> None:
    c = _podsready().cq("cq", {"f": {"cpu": 2}}).pending("w", "cq", cpu=1)
    c.cycle()
    lifecycle.report_pods_ready(c.state, "team/w", True)
    c.state.now += 7 * MINUTE
    c.state.deactivate("team/w", "", "by a test")
    event = next(e for e in c.state.events if e.type == EVICTED)
    assert (event.reason, event.waited) == ("Deactivated", 7 * MINUTE)


def test_backoff_doubles_up_to_the_maximum() -> None:
    config = WaitForPodsReady(backoff_base_seconds=60, backoff_max_seconds=300)
    assert [pods_ready.backoff(config, n) // SECOND for n in (1, 2, 3, 4, 5)] == [60, 120, 240, 300, 300]
    unbounded = WaitForPodsReady(backoff_base_seconds=1, backoff_max_seconds=0)
    assert pods_ready.backoff(unbounded, 11) == 1024 * SECOND


def test_blocked_admission_waits_for_reservations_still_waiting_for_checks() -> None:
    c = _podsready(block_admission=True)
    c.cq("a", {"f": {"cpu": 2}}, checks=("prov",)).cq("b", {"f": {"cpu": 2}})
    c.pending("first", "a", cpu=1)
    c.cycle()
    c.pending("second", "b", cpu=1)
    c.cycle()
    assert c.wl("second").admission is None
    assert c.condition("second", "QuotaReserved")[1] == "WaitingForPodsReady"
    lifecycle.report_pods_ready(c.state, "team/first", True)
    c.cycle()
    assert c.wl("second").admission is not None


# ------------------------------------------------------------------- loading


def test_a_stored_workload_being_evicted_is_an_eviction_in_progress_after_a_restart() -> None:
    c = Cluster(async_evictions=True).cq("cq", {"f": {"cpu": 2}})
    c.manifest(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "stopping", "namespace": "team"},
            "spec": {
                "queueName": "cq",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                        },
                    }
                ],
            },
            "status": {
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [{"name": "main", "count": 1, "flavors": {"cpu": "f"}}],
                },
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
                    {
                        "type": "Evicted",
                        "status": "True",
                        "reason": "DeactivatedDueToAdmissionCheck",
                        "message": "bye",
                    },
                ],
            },
        }
    )
    wl = c.wl("stopping")
    assert wl.eviction is not None and wl.eviction.underlying_cause == "AdmissionCheck"
    assert not wl.eviction.requeue
    c.state.complete_eviction("team/stopping")
    assert wl.admission is None and c.state.cq_usage["cq"][("f", "cpu")] == 0
    assert c.condition("stopping", "Requeued")[:2] == ("False", "DeactivatedDueToAdmissionCheck")


def test_a_check_that_does_not_apply_is_dropped_when_reported() -> None:
    c = Cluster().cq("cq", {"on-demand": {"cpu": 2}, "spot": {"cpu": 2}}, checks=("all", "spot-only"))
    cq = c.state.cluster_queues["cq"]
    c.state.apply_cluster_queue(replace(cq, check_on_flavors={"spot-only": ("spot",)}))
    c.pending("w", "cq", cpu=1)
    assert list(c.wl("w").checks) == ["all"], "without a reservation only the checks for every flavor"
    lifecycle.report_check(c.state, "team/w", "spot-only", "Ready")
    assert list(c.wl("w").checks) == ["all"]
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "on-demand"}
    lifecycle.report_check(c.state, "team/w", "all", "Ready")
    assert c.condition("w", "Admitted")[0] == "True", "spot-only does not apply to on-demand"
