"""Queues: StrictFIFO and BestEffortFIFO, inadmissible parking, equivalence shapes, ordering."""

from __future__ import annotations

import pytest

from pykueue.engine.queueing import ClusterQueueQueue
from pykueue.engine.workloads import Workload

from .builders import BEST_EFFORT_FIFO, STRICT_FIFO, Cluster


def blocked_head(strategy: str) -> Cluster:
    """A head that can never fit (8 cpus in a queue of 4), then a small one behind it."""
    return (
        Cluster()
        .cq("cq", {"f": {"cpu": 4}}, strategy=strategy)
        .pending("big", "cq", cpu=8, priority=1)
        .pending("small", "cq", cpu=1)
    )


def test_best_effort_fifo_parks_the_blocked_head_and_admits_the_next() -> None:
    c = blocked_head(BEST_EFFORT_FIFO)
    c.cycle()
    assert c.inadmissible_names("cq") == {"big"}
    assert c.pending_names("cq") == {"small"}
    c.cycle()
    assert c.admitted_names() == {"small"}
    assert c.inadmissible_names("cq") == {"big"}


def test_strict_fifo_keeps_the_blocked_head_in_front() -> None:
    c = blocked_head(STRICT_FIFO)
    c.cycle(3)
    assert c.admitted_names() == set()
    assert c.inadmissible_names("cq") == set()
    assert c.pending_names("cq") == {"big", "small"}
    assert all(r.heads == 1 for r in c.results)


def test_parked_workload_returns_when_quota_is_released() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 4}}).admitted("running", "cq", cpu=3).pending("waiting", "cq", cpu=2)
    c.cycle()
    assert c.inadmissible_names("cq") == {"waiting"}
    c.cycle(2)
    assert c.admitted_names() == {"running"}, "a parked workload is not retried without a change"
    c.finish("running")
    assert c.pending_names("cq") == {"waiting"}
    c.cycle()
    assert c.admitted_names() == {"waiting"}


def test_release_in_the_cohort_unparks_other_queues_of_the_tree() -> None:
    c = (
        Cluster()
        .cohort("co", parent="root")
        .cq("a", {"f": {"cpu": 2}}, cohort="co")
        .cq("b", {"f": {"cpu": 2}}, cohort="root")
        .admitted("lender-busy", "b", cpu=2)
        .pending("borrower", "a", cpu=4)
    )
    c.cycle()
    assert c.inadmissible_names("a") == {"borrower"}
    c.finish("lender-busy")
    assert c.pending_names("a") == {"borrower"}
    c.cycle()
    assert c.admitted_names() == {"borrower"}


def test_a_queue_that_changes_cohort_is_unparked_by_releases_in_its_new_tree_only() -> None:
    c = (
        Cluster()
        .cq("a", {"f": {"cpu": 2}}, cohort="one")
        .cq("b", {"f": {"cpu": 2}}, cohort="one")
        .cq("x", {"f": {"cpu": 2}}, cohort="two")
        .admitted("busy-b", "b", cpu=2)
        .admitted("busy-x", "x", cpu=2)
        .pending("borrower", "a", cpu=4)
    )
    c.cycle()  # builds the tree, and with it the queues of each cohort tree
    assert c.inadmissible_names("a") == {"borrower"}
    c.cq("a", {"f": {"cpu": 2}}, cohort="two")
    c.cycle()
    assert c.inadmissible_names("a") == {"borrower"}
    c.finish("busy-b")  # in the tree it left: nothing to hope for
    assert c.inadmissible_names("a") == {"borrower"}
    c.cq("late", {"f": {"cpu": 0}}, cohort="two")  # joins a tree already worked out
    c.pending("late-head", "late", cpu=5)
    c.cycle()
    assert c.inadmissible_names("late") == {"late-head"}
    c.finish("busy-x")
    assert c.pending_names("a") == {"borrower"} and c.pending_names("late") == {"late-head"}


def twins_cluster(gates: dict[str, bool] | None = None) -> Cluster:
    """Two identical workloads too big for the queue, then a different smaller one."""
    return (
        Cluster(gates=gates)
        .cq("cq", {"f": {"cpu": 4}})
        .admitted("running", "cq", cpu=2)
        .pending("twin-1", "cq", cpu=3, priority=1, created=1)
        .pending("twin-2", "cq", cpu=3, priority=1, created=2)
        .pending("other", "cq", cpu=2, created=3)
    )


def test_twins_of_a_parked_head_are_parked_with_it() -> None:
    c = twins_cluster()
    c.cycle()
    assert c.inadmissible_names("cq") == {"twin-1", "twin-2"}
    # So the next cycle's head is the different workload, which fits.
    c.cycle()
    assert c.admitted_names() == {"running", "other"}


def test_twins_are_not_parked_without_equivalence_hashing() -> None:
    c = twins_cluster({"SchedulingEquivalenceHashing": False})
    c.cycle()
    assert c.inadmissible_names("cq") == {"twin-1"}
    c.cycle()
    assert c.inadmissible_names("cq") == {"twin-1", "twin-2"}
    assert c.admitted_names() == {"running"}


def test_a_new_twin_of_a_parked_shape_is_parked_on_arrival_and_freed_with_it() -> None:
    c = twins_cluster().local_queue("cq", "cq", ns="elsewhere")
    c.cycle()
    # Same shape from another namespace: the namespace is not part of it.
    c.pending("twin-3", "cq", cpu=3, priority=1, created=4, ns="elsewhere")
    assert c.inadmissible_names("cq") == {"twin-1", "twin-2", "twin-3"}
    assert c.state.queues["cq"].inadmissible  # truth without counting every parked shape
    c.finish("running")
    assert c.inadmissible_names("cq") == set()
    assert not c.state.queues["cq"].inadmissible
    assert c.pending_names("cq") == {"twin-1", "twin-2", "twin-3", "other"}


def _reserved(c: Cluster, name: str) -> tuple[str, str] | None:
    cond = c.state.workloads[f"team/{name}"].conditions.get("QuotaReserved")
    return None if cond is None else (cond.reason, cond.message)


def test_with_explicit_status_parked_twins_say_they_were_bypassed_even_those_arriving_later() -> None:
    bypassed = "Bypassed scheduling evaluation because an equivalent workload recently failed"
    c = twins_cluster({"UnadmittedWorkloadsExplicitStatus": True})
    # Explicit status: a workload no cycle looked at yet says it waits for one.
    assert _reserved(c, "twin-2") == (
        "PendingEvaluation",
        "Workload is pending evaluation in the scheduling queue",
    )
    c.cycle()
    tried = _reserved(c, "twin-1")
    assert tried is not None and tried[0] == "WaitingForQuota" and tried[1] != bypassed
    assert _reserved(c, "twin-2") == ("WaitingForQuota", bypassed)
    c.pending("twin-3", "cq", cpu=3, priority=1, created=4)
    assert _reserved(c, "twin-3") == ("WaitingForQuota", bypassed)
    # Without the gate (upstream's default) a twin nobody tried has no condition.
    plain = twins_cluster()
    plain.cycle()
    assert _reserved(plain, "twin-2") is None


def test_a_workload_of_other_priority_is_not_a_twin() -> None:
    c = twins_cluster()
    c.pending("cousin", "cq", cpu=3, priority=0, created=0)
    c.cycle()
    assert c.inadmissible_names("cq") == {"twin-1", "twin-2"}
    assert "cousin" in c.pending_names("cq")


def admission_order(c: Cluster, cq: str, limit: int = 20) -> list[str]:
    """Admit one at a time (the queue holds one workload) and finish it, recording the order."""
    order: list[str] = []
    for _ in range(limit):
        result = c.cycle()
        for key in result.admitted:
            name = key.split("/", 1)[1]
            order.append(name)
            c.finish(name)
        if not c.state.queues[cq].active() and not result.admitted:
            break
    return order


@pytest.mark.parametrize("strategy", [STRICT_FIFO, BEST_EFFORT_FIFO])
def test_queue_orders_by_priority_then_creation_then_arrival(strategy: str) -> None:
    c = (
        Cluster()
        .cq("cq", {"f": {"cpu": 1}}, strategy=strategy)
        .pending("old-low", "cq", priority=0, created=0)
        .pending("new-high", "cq", priority=5, created=30)
        .pending("mid-late", "cq", priority=2, created=20)
        .pending("mid-early", "cq", priority=2, created=10)
        .pending("negative", "cq", priority=-1, created=-100)
        .pending("mid-early-second", "cq", priority=2, created=10)
    )
    assert admission_order(c, "cq") == [
        "new-high",
        "mid-early",
        "mid-early-second",
        "mid-late",
        "old-low",
        "negative",
    ]


def test_evicted_workload_is_ordered_by_its_eviction_time() -> None:
    c = (
        Cluster()
        .cq("cq", {"f": {"cpu": 1}})
        .admitted("evicted", "cq", created=0)
        .pending("younger", "cq", created=10)
    )
    c.state.now += 20 * 10**6
    c.state.evict("team/evicted", "AdmissionCheck", "test")
    assert admission_order(c, "cq") == ["younger", "evicted"]


def test_cycle_admits_non_borrowing_entry_before_higher_priority_borrower() -> None:
    """Two heads compete for the cohort's last 2 cpus: the one within its nominal goes first."""
    c = (
        Cluster()
        .cq("a", {"f": {"cpu": 2}}, cohort="co")
        .cq("b", {"f": {"cpu": 2}}, cohort="co")
        .admitted("a-running", "a", cpu=2)
        .pending("a-borrower", "a", cpu=2, priority=10)
        .pending("b-nominal", "b", cpu=2, priority=0)
    )
    result = c.cycle()
    assert result.admitted == ["team/b-nominal"]
    assert c.pending_names("a") | c.inadmissible_names("a") == {"a-borrower"}


def test_cycle_orders_borrowers_by_priority_then_age() -> None:
    def run(prio_a: int, prio_b: int, created_a: float, created_b: float) -> set[str]:
        c = (
            Cluster()
            .cq("a", {"f": {"cpu": 0}}, cohort="co")
            .cq("b", {"f": {"cpu": 0}}, cohort="co")
            .cq("lender", {"f": {"cpu": 2}}, cohort="co")
            .pending("from-a", "a", cpu=2, priority=prio_a, created=created_a)
            .pending("from-b", "b", cpu=2, priority=prio_b, created=created_b)
        )
        c.cycle()
        return c.admitted_names()

    assert run(1, 0, 10, 0) == {"from-a"}
    assert run(0, 1, 0, 10) == {"from-b"}
    assert run(0, 0, 10, 0) == {"from-b"}
    assert run(0, 0, 0, 10) == {"from-a"}


def test_one_head_per_cluster_queue_per_cycle() -> None:
    c = Cluster().cq("cq", {"f": {"cpu": 10}})
    for i in range(3):
        c.pending(f"w{i}", "cq", created=i)
    assert c.cycle().admitted == ["team/w0"]
    assert c.cycle().admitted == ["team/w1"]


def _wl(name: str, priority: int, seq: int, shape: str) -> Workload:
    wl = Workload(namespace="ns", name=name, queue_name="lq", pod_sets=[], priority=priority, seq=seq)
    wl.shape = shape
    return wl


def _drain(queue: ClusterQueueQueue) -> list[str]:
    names = []
    while (wl := queue.pop()) is not None:
        names.append(wl.name)
    return names


def test_a_parked_shape_group_is_skipped_then_returns_in_order_with_its_newest_keys() -> None:
    queue = ClusterQueueQueue("cq")
    for i, (priority, shape) in enumerate([(9, "big"), (9, "big"), (5, "mid"), (9, "big"), (1, "low")]):
        queue.push(_wl(f"w{i}", priority, i, shape))
    head = queue.pop()
    assert head is not None and head.name == "w0"
    queue.requeue(head, immediate=False, park_twins=True)  # parks the whole "big" group
    assert set(queue.inadmissible) == {"ns/w0", "ns/w1", "ns/w3"}
    assert len(queue) == 5 and sorted(w.name for w in queue.active()) == ["w2", "w4"]
    queue.set_sticky("ns/w3")  # re-keyed while parked: counts once it is back
    queue.remove("ns/w1")  # leaves while parked: never comes back
    queue.push(_wl("w5", 9, 5, "big"))  # a twin arriving while its shape is parked waits too
    first = queue.pop()
    assert first is not None and first.name == "w2"  # the big ones are set aside
    assert queue.unpark_all()
    assert not queue.inadmissible
    assert _drain(queue) == ["w3", "w0", "w5", "w4"]  # sticky first, then priority, then arrival
    assert len(queue) == 0


def test_a_parked_group_is_told_a_reason_once_and_only_newcomers_after() -> None:
    queue = ClusterQueueQueue("cq")
    for i in range(4):
        queue.push(_wl(f"w{i}", 9, i, "big"))
    head = queue.pop()
    assert head is not None
    queue.requeue(head, immediate=False, park_twins=True)
    names = lambda found: sorted(w.name for w in found)  # noqa: E731
    assert names(queue.unstamped_twins(head, "NoFit")) == ["w1", "w2", "w3"]
    assert queue.unstamped_twins(head, "NoFit") == []  # told already: nothing to ask again
    queue.push(_wl("w4", 9, 4, "big"))
    assert names(queue.unstamped_twins(head, "NoFit")) == ["w4"]  # a newcomer only
    assert names(queue.unstamped_twins(head, "Other")) == ["w1", "w2", "w3", "w4"]  # a new reason: all
    # Unparked and parked again, with the same reason: those that stayed in the group
    # still say it; one that was tried (and so told something else) and came back is asked.
    queue.unpark_all()
    again = queue.pop()
    assert again is not None and again.name == "w0"  # the held head came back first
    queue.requeue(again, immediate=False, park_twins=True)
    assert queue.unstamped_twins(again, "Other") == []
    tried = queue.pop()
    assert tried is None  # the whole shape is parked
    queue.unpark_all()
    w0, w1 = queue.pop(), queue.pop()
    assert w0 is not None and w1 is not None and (w0.name, w1.name) == ("w0", "w1")
    queue.requeue(w1, immediate=True, park_twins=False)  # w1 back in the group, told other things
    queue.requeue(w0, immediate=False, park_twins=True)
    assert names(queue.unstamped_twins(w0, "Other")) == ["w1"]
    queue.forget_stamps()  # the pending workloads were explained again
    assert names(queue.unstamped_twins(w0, "Other")) == ["w1", "w2", "w3", "w4"]
