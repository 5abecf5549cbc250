"""Flavor assignment: which flavor a pod set gets, and why the others were skipped."""

from __future__ import annotations

import pytest

from pykueue.engine.selectors import Taint, Toleration
from pykueue.scenario import runner

from .builders import LOWER_PRIORITY, MAY_STOP_SEARCH, STRICT_FIFO, TRY_NEXT_FLAVOR, Cluster, podset, q

GPU_TAINT = Taint("gpu", "NoSchedule", "true")


def tainted_cluster() -> Cluster:
    return (
        Cluster()
        .flavor("tainted", taints=[GPU_TAINT])
        .flavor("plain")
        .cq("cq", {"tainted": {"cpu": 10}, "plain": {"cpu": 10}})
    )


def test_untolerated_taint_skips_the_flavor() -> None:
    c = tainted_cluster().pending("w", "cq", cpu=2)
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "plain"}


def test_toleration_makes_the_tainted_flavor_first_choice() -> None:
    c = tainted_cluster()
    c.pending("w", "cq", pod_sets=[podset(cpu=2, tolerations=[Toleration("gpu", "Exists")])])
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "tainted"}


def test_toleration_of_another_value_does_not_cover_the_taint() -> None:
    c = tainted_cluster()
    c.pending("w", "cq", pod_sets=[podset(cpu=2, tolerations=[Toleration("gpu", "Equal", "false")])])
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "plain"}


def test_only_tainted_flavors_leave_the_workload_pending_with_the_taint_named() -> None:
    c = Cluster().flavor("tainted", taints=[GPU_TAINT]).cq("cq", {"tainted": {"cpu": 10}})
    c.pending("w", "cq", cpu=2)
    c.cycle()
    assert c.admitted_names() == set()
    status, reason, message = c.condition("w", "QuotaReserved")
    assert (status, reason) == ("False", "NoMatchingFlavor")
    assert "untolerated taint {gpu=true:NoSchedule} in flavor tainted" in message
    assert c.inadmissible_names("cq") == {"w"}


def selector_cluster() -> Cluster:
    return (
        Cluster()
        .flavor("x86", labels={"arch": "amd64"})
        .flavor("arm", labels={"arch": "arm64"})
        .cq("cq", {"x86": {"cpu": 10}, "arm": {"cpu": 10}})
    )


def test_node_selector_mismatch_skips_the_flavor() -> None:
    c = selector_cluster()
    c.pending("w", "cq", pod_sets=[podset(cpu=1, node_selector={"arch": "arm64"})])
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "arm"}


def test_node_selector_on_a_key_the_flavor_does_not_define_matches() -> None:
    c = selector_cluster()
    c.pending("w", "cq", pod_sets=[podset(cpu=1, node_selector={"zone": "z1"})])
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "x86"}


def test_node_selector_matching_no_flavor_names_every_flavor() -> None:
    c = selector_cluster()
    c.pending("w", "cq", pod_sets=[podset(cpu=1, node_selector={"arch": "s390x"})])
    c.cycle()
    status, reason, message = c.condition("w", "QuotaReserved")
    assert (status, reason) == ("False", "NoMatchingFlavor")
    assert "flavor x86 doesn't match node affinity" in message
    assert "flavor arm doesn't match node affinity" in message


def test_taint_and_selector_read_from_manifests() -> None:
    """The same skip, with the flavor written as a manifest (intake's taint and label reading)."""
    c = Cluster().manifest(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "spot"},
            "spec": {
                "nodeLabels": {"arch": "amd64"},
                "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            },
        }
    )
    c.flavor("plain").cq("cq", {"spot": {"cpu": 4}, "plain": {"cpu": 4}}).pending("w", "cq", cpu=1)
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "plain"}


def test_request_above_maximum_capacity_is_explained() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 10}}).pending("w", "cq", cpu=12)
    c.cycle()
    status, reason, message = c.condition("w", "QuotaReserved")
    assert (status, reason) == ("False", "ExceedsMaxQuota")
    assert "insufficient quota for cpu in flavor f" in message
    assert "current podset request (12) > maximum capacity (10)" in message


def borrowing_cluster(when_can_borrow: str) -> Cluster:
    """Flavor one fits only by borrowing 1 cpu from the cohort; flavor two fits within nominal."""
    return (
        Cluster()
        .cq(
            "test",
            {"one": {"cpu": q(10, borrow=1)}, "two": {"cpu": 10}},
            cohort="co",
            when_can_borrow=when_can_borrow,
        )
        .cq("secondary", {"one": {"cpu": 1}}, cohort="co")
        .admitted("running", "test", cpu=2, flavor="one")
        .pending("new", "test", cpu=9, created=10)
    )


@pytest.mark.parametrize(
    ("when_can_borrow", "flavor"),
    [(MAY_STOP_SEARCH, "one"), (TRY_NEXT_FLAVOR, "two")],
)
def test_when_can_borrow_decides_between_borrowing_and_a_later_flavor(
    when_can_borrow: str, flavor: str
) -> None:
    c = borrowing_cluster(when_can_borrow)
    c.cycle()
    assert c.flavors_of("new") == {"cpu": flavor}
    borrowed = c.state.cq_usage["test"].get(("one", "cpu"), 0) > 10_000
    assert borrowed == (flavor == "one")


def test_try_next_flavor_falls_back_to_borrowing_in_the_first_flavor() -> None:
    c = borrowing_cluster(TRY_NEXT_FLAVOR).admitted("filler", "test", cpu=10, flavor="two")
    c.cycle()
    assert c.flavors_of("new") == {"cpu": "one"}
    assert c.state.cq_usage["test"][("one", "cpu")] == 11_000


def test_all_resources_of_a_group_get_the_same_flavor() -> None:
    c = Cluster().cq("cq", {"small": {"cpu": 4, "memory": 4}, "big": {"cpu": 8, "memory": 8}})
    # cpu would fit in small, memory would not: both must move to big together.
    c.pending("w", "cq", cpu=2, memory=6)
    c.cycle()
    assert c.flavors_of("w") == {"cpu": "big", "memory": "big"}


def test_settled_state_does_not_depend_on_where_the_flavor_scan_stopped() -> None:
    """Regression: `settle` used to stop while a resumed flavor scan would still act.

    Cycle 1: ``big`` fits in f0 only by borrowing b's idle cpu, but b's own head is
    admitted first, so ``big`` no longer fits and its scan stops at f0. Cycle 2 resumes
    at f1 (quota 0): ExceedsMaxQuota, nothing changes, so `runner.settle` stops. Cycle
    3 restarts at f0 and preempts ``low``: the "settled" state was not settled, and its
    condition explained the pending workload by the wrong flavor.
    """
    c = (
        Cluster()
        .cq(
            "a",
            {"f0": {"cpu": 4}, "f1": {"cpu": 0}},
            cohort="co",
            strategy=STRICT_FIFO,
            within=LOWER_PRIORITY,
            when_can_preempt=MAY_STOP_SEARCH,
        )
        .cq("b", {"f0": {"cpu": 1}}, cohort="co")
        .admitted("low", "a", cpu=1, priority=0)
        .pending("big", "a", cpu=4, priority=1)
        .pending("small", "b", cpu=1)
    )
    runner.settle(c.state)
    settled = (c.admitted_names(), c.condition("big", "QuotaReserved"))
    result = c.cycle()
    assert not result.changed, f"one more cycle after settle changed the state: {result}"
    assert (c.admitted_names(), c.condition("big", "QuotaReserved")) == settled
