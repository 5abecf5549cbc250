"""Each governance scenario that shows a policy at work fails with the policy taken out: the
expectations hold because of the policy, not by chance. (Their "off" twins, 902, 912, 914,
915, 922, 924 and 955, pass with upstream's behaviour.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pykueue.cli.scenario_command import check
from pykueue.scenario import loader, runner

SCENARIOS = Path(__file__).parents[1] / "scenarios" / "governance"
WITH_POLICY = [
    "901-default-priority-class-from-localqueue.yaml",
    "903-default-priority-class-from-clusterqueue.yaml",
    "911-aging-lets-a-starved-workload-preempt.yaml",
    "913-aging-orders-the-queue.yaml",
    "916-aging-named-priority-class-ages.yaml",
    "921-contract-min-run-time.yaml",
    "923-contract-max-preemptions.yaml",
    "931-inference-training-research-pools.yaml",
    "941-cost-least-lost-work-first.yaml",
    "942-cost-checkpoint-interval.yaml",
    "943-cost-wait-for-a-declared-end.yaml",
    "945-cost-put-off-a-costly-preemption.yaml",
    "946-cost-policy-from-a-cohort.yaml",
    "947-cost-least-lost-under-fair-sharing.yaml",
    "948-cost-wait-for-end-under-fair-sharing.yaml",
    "951-reservation-borrowing-gang-starts.yaml",
    "953-reservation-no-backfill-past-start.yaml",
    "954-reservation-never-blocks-nominal-quota.yaml",
    "956-reservation-from-cohort.yaml",
]


def _problems(doc: dict[str, object], source: str) -> list[str]:
    scenario = loader.parse(doc, source)
    return check(scenario, runner.run(scenario))


@pytest.mark.parametrize("name", WITH_POLICY)
def test_the_scenario_fails_without_its_policy(name: str) -> None:
    doc = yaml.safe_load((SCENARIOS / name).read_text())
    assert _problems(doc, name) == []
    removed = 0
    for obj in doc["objects"]:
        annotations = obj.get("metadata", {}).get("annotations", {})
        for key in [k for k in annotations if k.startswith("pykueue.io/")]:
            del annotations[key]
            removed += 1
    assert removed
    assert _problems(doc, name), f"{name} passes without its policy"
