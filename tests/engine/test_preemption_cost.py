"""Cost-aware preemption (docs/governance.md): the annotation and the configuration are read
strictly, lost work is counted with checkpoints, and the victims that lose the least go first.
The scenarios 941-944 pin the decisions; test_policies_matter shows 941-943 fail without it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from pykueue.api import configuration, governance
from pykueue.api.governance import PreemptionCost
from pykueue.cli.scenario_command import check
from pykueue.engine import lifecycle, lost_work, targets
from pykueue.engine.config import EngineConfig
from pykueue.engine.configuration import engine_config
from pykueue.engine.specs import LOWER_PRIORITY
from pykueue.errors import ValidationError
from pykueue.scenario import loader, runner

from .builders import SECOND, T0, Cluster, q

HOUR = 3600 * SECOND
SCENARIOS = Path(__file__).parents[1] / "scenarios" / "governance"


def test_the_annotation_is_read_exactly() -> None:
    annotations = {governance.PREEMPTION_COST: '{"leastLostWork": true, "waitForEnd": "30m"}'}
    assert governance.problems("ClusterQueue", annotations) == []
    assert governance.preemption_cost(annotations) == PreemptionCost(True, 30 * 60 * SECOND)
    assert governance.preemption_cost({governance.PREEMPTION_COST: '{"waitForEnd": "5m"}'}) == PreemptionCost(
        False, 5 * 60 * SECOND
    )


@pytest.mark.parametrize(
    ("value", "path", "words"),
    [
        ('{"leastLostWork": "yes"}', ".leastLostWork", "must be true or false"),
        ('{"waitForEnd": "soon"}', ".waitForEnd", "is not a duration"),
        ('{"leastLost": true}', ".leastLost", "unknown field"),
        ("{}", "", "must set at least one of"),
    ],
)
def test_a_bad_annotation_names_the_field(value: str, path: str, words: str) -> None:
    found = governance.problems("ClusterQueue", {governance.PREEMPTION_COST: value})
    assert found, value
    assert found[0].path == f"metadata.annotations[{governance.PREEMPTION_COST}]{path}"
    assert words in found[0].message


def _read(sections: dict[str, object]) -> EngineConfig:
    return engine_config(configuration.parse_sections(sections, "config.yaml"))


def test_the_site_default_is_read_and_a_bad_one_refused() -> None:
    config = _read({"pykueue": {"preemptionCost": {"leastLostWork": True}}})
    assert config.default_preemption_cost == PreemptionCost(True, None)
    assert _read({}).default_preemption_cost is None
    with pytest.raises(ValidationError, match=r"pykueue.preemptionCost.waitForEnd"):
        _read({"pykueue": {"preemptionCost": {"waitForEnd": 3}}})


def test_a_bad_checkpoint_interval_makes_the_workload_invalid_naming_the_field() -> None:
    assert governance.checkpoint_interval({governance.CHECKPOINT_INTERVAL: "1h"}) == (HOUR, "")
    interval, problem = governance.checkpoint_interval({governance.CHECKPOINT_INTERVAL: "hourly"})
    assert interval is None
    assert problem.startswith(f"metadata.annotations[{governance.CHECKPOINT_INTERVAL}]: ")


def _pool() -> Cluster:
    c = Cluster()
    c.cq("pool", {"f": {"gpu": q(8)}}, within=LOWER_PRIORITY)
    return c


def test_lost_work_counts_only_the_run_since_the_last_checkpoint() -> None:
    c = _pool()
    c.admitted("saved", "pool", gpu=4, admitted_at=0)
    wl = c.wl("saved")
    now = T0 + 2 * HOUR + 600 * SECOND
    assert lost_work.lost_time(wl, now) == 2 * HOUR + 600 * SECOND
    wl.checkpoint_interval = HOUR
    assert lost_work.lost_time(wl, now) == 600 * SECOND
    assert lost_work.lost_by_resource(wl, now) == {"gpu": 4000 * 600 * SECOND}


def _contest(policy: PreemptionCost | None) -> Cluster:
    """`wide` (4 GPUs) ran 40 minutes; `narrow` (2 GPUs) ran 2 hours; `long` (2 GPUs) ran 1 hour,
    all of priority 0. `urgent` needs 2 of the 8."""
    c = _pool()
    if policy is not None:
        spec = c.state.cluster_queues["pool"]
        c.state.apply_cluster_queue(dataclasses.replace(spec, preemption_cost=policy))
    c.admitted("narrow", "pool", gpu=2, admitted_at=0)
    c.admitted("long", "pool", gpu=2, admitted_at=3600)
    c.admitted("wide", "pool", gpu=4, admitted_at=2 * 3600 - 2400)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "pool", gpu=2, priority=100, created=2 * 3600)
    c.settle()
    return c


def test_least_lost_work_weighs_gpus_and_time() -> None:
    # Upstream: the most recently admitted first, `wide`, 4 GPUs x 40 minutes lost.
    assert _contest(None).preempted_names() == {"wide"}
    # Least lost: `wide` loses 160 GPU-minutes, `long` 120, `narrow` 240: `long`.
    assert _contest(PreemptionCost(True)).preempted_names() == {"long"}


def test_the_priority_still_comes_first() -> None:
    """A victim of a higher priority than one left running would preempt that one in turn."""
    c = _pool()
    spec = c.state.cluster_queues["pool"]
    c.state.apply_cluster_queue(dataclasses.replace(spec, preemption_cost=PreemptionCost(True)))
    c.admitted("old", "pool", gpu=4, admitted_at=0)
    c.admitted("young", "pool", gpu=4, priority=5, admitted_at=2 * 3600 - 600)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "pool", gpu=4, priority=100, created=2 * 3600)
    c.settle()
    assert c.preempted_names() == {"old"}


def test_a_victims_lost_work_is_kept_for_describe() -> None:
    c = _pool()
    spec = c.state.cluster_queues["pool"]
    c.state.apply_cluster_queue(dataclasses.replace(spec, preemption_cost=PreemptionCost(True)))
    c.admitted("old", "pool", gpu=4, admitted_at=0)
    c.admitted("young", "pool", gpu=4, admitted_at=2 * 3600 - 600)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "pool", gpu=4, priority=100, created=2 * 3600)
    c.settle()
    assert c.preempted_names() == {"young"}
    # The victim's lost work is kept for `describe`: 4 GPUs x 10 minutes.
    assert c.wl("young").lost_work == {"gpu": 4000 * 600 * SECOND}
    assert lost_work.words(c.wl("young").lost_work or {}) == "0.667 gpu-hours"


def test_the_default_from_the_configuration_fails_without_it() -> None:
    doc = yaml.safe_load((SCENARIOS / "944-cost-default-from-configuration.yaml").read_text())
    scenario = loader.parse(doc, "944")
    assert check(scenario, runner.run(scenario)) == []
    del doc["config"]
    scenario = loader.parse(doc, "944")
    assert check(scenario, runner.run(scenario)), "944 passes without the configuration's policy"


def test_max_lost_work_and_put_off_for_are_read_together() -> None:
    value = '{"maxLostWork": "4h", "putOffFor": "6h"}'
    assert governance.preemption_cost({governance.PREEMPTION_COST: value}) == PreemptionCost(
        False, None, 4 * HOUR, 6 * HOUR
    )
    found = governance.problems("ClusterQueue", {governance.PREEMPTION_COST: '{"maxLostWork": "4h"}'})
    assert found and "go together" in found[0].message
    found = governance.problems(
        "ClusterQueue", {governance.PREEMPTION_COST: '{"maxLostWork": "4h", "putOffFor": "never"}'}
    )
    assert found[0].path.endswith(".putOffFor")


def test_a_cohort_takes_the_annotation_and_a_local_queue_does_not() -> None:
    annotations = {governance.PREEMPTION_COST: '{"leastLostWork": true}'}
    assert governance.problems("Cohort", annotations) == []
    assert governance.problems("Cohort", {governance.PREEMPTION_COST: "{}"})
    assert "unknown pykueue annotation" in governance.problems("LocalQueue", annotations)[0].message


def test_the_queue_overrides_the_cohort_which_overrides_the_site() -> None:
    site, org, own = PreemptionCost(True), PreemptionCost(False, HOUR), PreemptionCost(False, 2 * HOUR)
    c = Cluster()
    c.state.config = dataclasses.replace(c.state.config, default_preemption_cost=site)
    c.cohort("org").cohort("lab", parent="org")
    c.cq("pool", {"f": {"gpu": q(8)}}, cohort="lab").cq("alone", {"f": {"gpu": q(8)}})
    assert targets.cost_policy(c.state, "pool") == site  # no Cohort has one: the site's
    assert targets.cost_policy(c.state, "alone") == site
    c.state.apply_cohort(dataclasses.replace(c.state.cohorts["org"], preemption_cost=org))
    assert targets.cost_policy(c.state, "pool") == org  # the nearest Cohort up the tree
    assert targets.cost_policy(c.state, "alone") == site
    spec = c.state.cluster_queues["pool"]
    c.state.apply_cluster_queue(dataclasses.replace(spec, preemption_cost=own))
    assert targets.cost_policy(c.state, "pool") == own


def test_sized_lost_work_counts_in_the_preemptors_size() -> None:
    c = _pool()
    c.admitted("wide", "pool", gpu=8, admitted_at=0)
    wl = c.wl("wide")
    now = T0 + 900 * SECOND
    # 8 GPUs x 15 minutes: 2 hours of work a 1-GPU preemptor's size, 1 hour of a 2-GPU one.
    assert lost_work.sized(wl, now, {("f", "gpu"): 1000}) == 2 * HOUR
    assert lost_work.sized(wl, now, {("f", "gpu"): 2000}) == HOUR


def test_a_put_off_preemption_wakes_the_engine_when_it_ends() -> None:
    c = _pool()
    spec = c.state.cluster_queues["pool"]
    c.state.apply_cluster_queue(
        dataclasses.replace(spec, preemption_cost=PreemptionCost(False, None, HOUR, HOUR))
    )
    c.admitted("big", "pool", gpu=8, admitted_at=0)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "pool", gpu=2, priority=100, created=2 * 3600)
    c.settle()
    assert c.preempted_names() == set()
    assert lifecycle.next_deadline(c.state) == T0 + 3 * HOUR
    lifecycle.advance(c.state, T0 + 3 * HOUR)
    c.settle()
    assert c.preempted_names() == {"big"}


def test_a_costly_preemption_is_put_off_under_fair_sharing_too() -> None:
    c = Cluster(fair_sharing=True)
    c.cohort("lab")
    c.cq("borrower", {"f": {"gpu": q(0)}}, cohort="lab")
    c.cq("lender", {"f": {"gpu": q(8)}}, cohort="lab", reclaim="Any")
    spec = c.state.cluster_queues["lender"]
    c.state.apply_cluster_queue(
        dataclasses.replace(spec, preemption_cost=PreemptionCost(False, None, HOUR, HOUR))
    )
    c.admitted("big", "borrower", gpu=8, admitted_at=0)
    lifecycle.advance(c.state, T0 + 2 * HOUR)
    c.pending("urgent", "lender", gpu=2, created=2 * 3600)
    c.settle()
    assert c.preempted_names() == set()  # 16 GPU-hours lost would be 8 hours of a 2-GPU run
    lifecycle.advance(c.state, T0 + 3 * HOUR)
    c.settle()
    assert c.preempted_names() == {"big"}


def test_the_lost_work_annotation_round_trips_and_a_bad_one_is_passed_over() -> None:
    lost = {"nvidia.com/gpu": 4000 * 600 * SECOND, "cpu": 1000 * 600 * SECOND}
    text = governance.lost_work_text(lost)
    assert governance.lost_work({governance.LOST_WORK: text}) == lost
    assert governance.lost_work_text(None) == ""
    for bad in ("", "lots", "[1]", '{"gpu": "1"}', '{"gpu": true}', '{"gpu": -5}'):
        assert governance.lost_work({governance.LOST_WORK: bad}) is None, bad
