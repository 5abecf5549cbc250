"""The governance annotations (docs/governance.md): validated like API fields, read into policies,
and `pykueue validate` pointing the invented queue fields at the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pykueue.api import governance
from pykueue.cli.main import app

runner = CliRunner()

POLICIES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: research
  annotations:
    pykueue.io/aging: '{"rate": "2/10m", "cap": 50, "priorityClasses": ["research", ""]}'
    pykueue.io/preemption-contract: '{"minRunTime": "30m", "maxPreemptions": 2, "window": "24h"}'
    pykueue.io/default-priority-class: research
spec: {namespaceSelector: {}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: team-a, annotations: {pykueue.io/default-priority-class: serving}}
spec: {clusterQueue: research}
"""


def _validate(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "q.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["validate", "-f", str(path)])
    return result.exit_code, result.output.splitlines()


def test_valid_policies_pass_validate(tmp_path: Path) -> None:
    code, lines = _validate(tmp_path, POLICIES)
    assert code == 0, lines


def test_policies_are_read_exactly() -> None:
    annotations = {
        governance.AGING: '{"rate": "2/10m", "cap": 50, "maxPriority": 100}',
        governance.PREEMPTION_CONTRACT: '{"minRunTime": "1h30m", "maxPreemptions": 2, "window": "24h"}',
    }
    aging = governance.aging(annotations)
    assert aging == governance.Aging(points=2, per=600 * 10**6, cap=50, max_priority=100)
    assert aging.boost(0) == 0
    assert aging.boost(599 * 10**6) == 1  # 2 points per 10 minutes, rounded down
    assert aging.boost(30 * 60 * 10**6) == 6
    assert aging.boost(10**12) == 50  # the cap
    assert aging.applies_to(100, "") and not aging.applies_to(101, "")
    assert governance.contract(annotations) == governance.PreemptionContract(
        min_run_time=5400 * 10**6, max_preemptions=2, window=86400 * 10**6
    )


@pytest.mark.parametrize(
    ("kind", "annotations", "path", "words"),
    [
        ("ClusterQueue", {governance.AGING: "1/10m"}, "[pykueue.io/aging]", "JSON object"),
        ("ClusterQueue", {governance.AGING: '{"cap": 5}'}, "[pykueue.io/aging].rate", "required"),
        ("ClusterQueue", {governance.AGING: '{"rate": "1/10m"}'}, "[pykueue.io/aging].cap", "required"),
        ("ClusterQueue", {governance.AGING: '{"rate": "1/soon", "cap": 5}'}, ".rate", "not a duration"),
        ("ClusterQueue", {governance.AGING: '{"rate": "1/1m", "cap": 5, "x": 1}'}, ".x", "unknown field"),
        ("ClusterQueue", {governance.PREEMPTION_CONTRACT: "{}"}, "contract]", "at least one"),
        ("ClusterQueue", {governance.PREEMPTION_CONTRACT: '{"minRunTime": 5}'}, ".minRunTime", "duration"),
        ("ClusterQueue", {governance.PREEMPTION_CONTRACT: '{"window": "1h"}'}, "contract]", "together"),
        ("ClusterQueue", {"pykueue.io/agin": "{}"}, "[pykueue.io/agin]", "unknown pykueue annotation"),
        ("LocalQueue", {governance.AGING: "{}"}, "[pykueue.io/aging]", "unknown pykueue annotation"),
        ("LocalQueue", {governance.DEFAULT_PRIORITY_CLASS: "Not_A_Name"}, "class]", "WorkloadPriorityClass"),
    ],
)
def test_bad_policies_name_the_field(kind: str, annotations: dict[str, str], path: str, words: str) -> None:
    problems = governance.problems(kind, annotations)
    assert problems, "expected a problem"
    assert any(p.path.startswith("metadata.annotations[") and p.path.endswith(path) for p in problems), (
        problems
    )
    assert any(words in p.message for p in problems), problems


def test_other_annotations_are_left_alone() -> None:
    assert governance.problems("ClusterQueue", {"example.com/team": "a", "kueue.x-k8s.io/x": "y"}) == []


def test_validate_points_invented_queue_fields_at_the_real_ones(tmp_path: Path) -> None:
    code, lines = _validate(
        tmp_path,
        """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Queue
metadata: {name: a, namespace: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  scheduling: {strategy: fifo}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq, priority: 5}
""",
    )
    assert code == 1
    text = "\n".join(lines)
    assert "Queue/a kind: kind Queue" in text and "kind: LocalQueue" in text
    assert (
        "ClusterQueue/cq spec.scheduling: unknown field: the queueing order is the ClusterQueue's spec.queueingStrategy"
        in text
    )
    assert "LocalQueue/default/lq spec.priority: unknown field:" in text
    assert "pykueue.io/default-priority-class" in text


def test_the_worked_example_validates() -> None:
    example = Path(__file__).parents[2] / "examples" / "governance" / "pools.yaml"
    result = runner.invoke(app, ["validate", "-f", str(example)])
    assert result.exit_code == 0, result.output


def test_standalone_keeps_the_policies_and_strips_the_servers_keys() -> None:
    from pykueue.standalone.http import owners

    cq = {
        "kind": "ClusterQueue",
        "metadata": {"name": "a", "annotations": {governance.AGING: "{}", "pykueue.io/run-as-uid": "0"}},
    }
    job = {"kind": "Job", "metadata": {"name": "j", "annotations": {governance.AGING: "{}"}}}
    owners.strip_server_annotations(cq)
    owners.strip_server_annotations(job)
    assert cq["metadata"]["annotations"] == {governance.AGING: "{}"}
    assert "annotations" not in job["metadata"]
