"""The preemption contract in the engine: it protects a workload from any preemptor (its own
queue, a reclaiming queue of the cohort, fair sharing), its end is a deadline the controllers
wake up for, and the preemptions it counts are the workload's own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pykueue.api.governance import PreemptionContract
from pykueue.cli import controller_command
from pykueue.engine import lifecycle
from pykueue.engine.specs import ANY, LOWER_PRIORITY
from pykueue.engine.state import State

from .builders import SECOND, T0, Cluster, q

MINUTE = 60 * SECOND


def _with_contract(c: Cluster, cq: str, contract: PreemptionContract) -> None:
    spec = c.state.cluster_queues[cq]
    c.state.apply_cluster_queue(dataclasses.replace(spec, contract=contract))


def _cohort(fair: bool) -> Cluster:
    """`lender` lends its idle 4 CPUs to `borrower`; then `lender` wants them back."""
    c = Cluster(fair_sharing=fair)
    c.cq("lender", {"f": {"cpu": q(4)}}, cohort="co", within=LOWER_PRIORITY, reclaim=ANY)
    c.cq("borrower", {"f": {"cpu": q(0)}}, cohort="co")
    c.admitted("guest", "borrower", cpu=4, admitted_at=0)
    c.pending("owner", "lender", cpu=4, priority=10)
    return c


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair-sharing"])
def test_reclaim_waits_for_the_borrowers_min_run_time(fair: bool) -> None:
    c = _cohort(fair)
    _with_contract(c, "borrower", PreemptionContract(min_run_time=20 * MINUTE))
    lifecycle.advance(c.state, T0 + 5 * MINUTE)
    c.settle()
    assert c.admitted_names() == {"guest"} and c.preempted_names() == set()
    assert lifecycle.next_deadline(c.state) == T0 + 20 * MINUTE
    _, _, message = c.condition("owner", "QuotaReserved")
    assert message.endswith(
        "1 admitted workload(s) of ClusterQueue borrower protected from preemption by its contract, "
        "the first for another 900s"
    ), message
    lifecycle.advance(c.state, T0 + 20 * MINUTE)
    c.settle()
    assert c.admitted_names() == {"owner"} and c.preempted_names() == {"guest"}


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair-sharing"])
def test_without_a_contract_the_borrower_is_reclaimed_at_once(fair: bool) -> None:
    c = _cohort(fair)
    c.settle()
    assert c.admitted_names() == {"owner"} and c.preempted_names() == {"guest"}


def test_max_preemptions_zero_never_preempts_and_sets_no_deadline() -> None:
    c = _cohort(False)
    _with_contract(c, "borrower", PreemptionContract(max_preemptions=0, window=MINUTE))
    c.settle()
    lifecycle.advance(c.state, T0 + 1000 * MINUTE)
    c.settle()
    assert c.admitted_names() == {"guest"}
    assert lifecycle.next_deadline(c.state) is None


def test_the_preemptor_queue_contract_does_not_protect_others() -> None:
    c = _cohort(False)
    _with_contract(c, "lender", PreemptionContract(min_run_time=60 * MINUTE))
    c.settle()
    assert c.preempted_names() == {"guest"}  # the contract of the victim's queue counts
    assert c.wl("guest").preempted_at == (T0,)


def test_the_configuration_default_protects_queues_without_their_own(tmp_path: Path) -> None:
    """`pykueue.preemptionContract` in the controller's --config file reaches the engine, and
    a ClusterQueue's own annotation wins over it."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
        "pykueue:\n  preemptionContract: {minRunTime: 20m}\n",
        encoding="utf-8",
    )
    config = controller_command.engine_config(path, fair_sharing=False, nominal_first=True)
    assert config.default_contract == PreemptionContract(min_run_time=20 * MINUTE)
    c = Cluster()
    c.state = State(config=dataclasses.replace(config, async_evictions=False))
    c.state.now = T0
    c.cq("lender", {"f": {"cpu": q(4)}}, cohort="co", within=LOWER_PRIORITY, reclaim=ANY)
    c.cq("borrower", {"f": {"cpu": q(0)}}, cohort="co")
    assert c.state.cluster_queues["borrower"].contract == config.default_contract
    c.admitted("guest", "borrower", cpu=4, admitted_at=0)
    c.pending("owner", "lender", cpu=4, priority=10)
    lifecycle.advance(c.state, T0 + 5 * MINUTE)
    c.settle()
    assert c.preempted_names() == set()
    assert lifecycle.next_deadline(c.state) == T0 + 20 * MINUTE
    # The queue's own (shorter) contract replaces the default.
    _with_contract(c, "borrower", PreemptionContract(min_run_time=5 * MINUTE))
    c.settle()
    assert c.admitted_names() == {"owner"} and c.preempted_names() == {"guest"}
