"""Issue 45, gap 3: ``waitForEnd`` under fair sharing (docs/governance.md). Scenario 948 waits
for a victim its limit ends within ``waitForEnd`` (and fails without the policy,
test_policies_matter); here, a victim that ends later than that is preempted at once."""

from __future__ import annotations

from pathlib import Path

import yaml

from pykueue.scenario import loader, runner

SCENARIO = (
    Path(__file__).parents[1] / "scenarios" / "governance" / "948-cost-wait-for-end-under-fair-sharing.yaml"
)


def _run(wait_for_end: str) -> dict[str, object]:
    doc = yaml.safe_load(SCENARIO.read_text())
    for obj in doc["objects"]:
        if obj["metadata"]["name"] == "serve":
            obj["metadata"]["annotations"]["pykueue.io/preemption-cost"] = (
                f'{{"waitForEnd": "{wait_for_end}"}}'
            )
    doc["steps"] = doc["steps"][:2]  # urgent arrives; one settle
    del doc["expect"]
    return runner.run(loader.parse(doc, SCENARIO.name))


def test_a_victim_that_ends_after_wait_for_end_is_preempted_at_once() -> None:
    assert _run("5m")["preempted"] == ["default/train"]  # train's limit ends it in 10 minutes


def test_a_victim_that_ends_within_wait_for_end_is_waited_for() -> None:
    assert _run("10m")["preempted"] == []
