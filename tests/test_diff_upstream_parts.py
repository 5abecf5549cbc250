"""The parts of `make diff-upstream` that need no API server (issue 39): the generator's cases are valid
scenarios and the same for the same seed; the comparison sees a difference; shrinking removes what the
divergence does not need. The play against upstream is tests/kube/test_diff_upstream.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ is not a package of the wheel; the repository's root holds it.
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from benchmarks.diff_upstream import compare, generator, known, shrink  # noqa: E402
from benchmarks.diff_upstream.upstream import kueue_config  # noqa: E402

from pykueue.scenario import loader, runner  # noqa: E402


def test_cases_are_valid_scenarios_and_repeatable() -> None:
    for index in range(60):
        case = generator.generate(5, index)
        assert case == generator.generate(5, index)
        loader.parse(case, f"case {index}")  # raises on anything the format refuses
    assert generator.generate(5, 0) != generator.generate(6, 0)


def test_the_generator_reaches_the_features_it_claims() -> None:
    seen: set[str] = set()
    for index in range(200):
        case = generator.generate(1, index)
        config = case.get("config") or {}
        if "fairSharing" in config:
            seen.add("fair sharing")
        for obj in case["objects"]:
            spec = obj.get("spec") or {}
            if obj["kind"] == "Cohort" and spec.get("parentName"):
                seen.add("cohort tree")
            if obj["kind"] == "ClusterQueue":
                seen.add(spec["queueingStrategy"])
                if len(spec["resourceGroups"]) > 1:
                    seen.add("two resource groups")
                if any(
                    "lendingLimit" in r for f in spec["resourceGroups"][0]["flavors"] for r in f["resources"]
                ):
                    seen.add("lending limit")
            if obj["kind"] == "ResourceFlavor" and spec.get("nodeTaints"):
                seen.add("taints")
            if obj["kind"] == "Workload":
                if len(spec["podSets"]) > 1:
                    seen.add("two pod sets")
                if any("minCount" in ps for ps in spec["podSets"]):
                    seen.add("partial admission")
        for step in case["steps"]:
            seen.update(k for k in step if k in ("finish", "delete"))
            if any(o.get("spec", {}).get("active") is False for o in step.get("apply", [])):
                seen.add("deactivate")
    assert seen >= {
        "fair sharing",
        "cohort tree",
        "StrictFIFO",
        "BestEffortFIFO",
        "two resource groups",
        "lending limit",
        "taints",
        "two pod sets",
        "partial admission",
        "finish",
        "delete",
        "deactivate",
    }


def _new_kinds(case: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    config = case.get("config") or {}
    if "waitForPodsReady" in config:
        seen.add("waitForPodsReady")
        if config["waitForPodsReady"]["blockAdmission"]:
            seen.add("blockAdmission")
    for obj in case["objects"]:
        spec = obj.get("spec") or {}
        if obj["kind"] in ("AdmissionCheck", "WorkloadPriorityClass"):
            seen.add(obj["kind"])
        if obj["kind"] == "ClusterQueue" and "admissionChecksStrategy" in spec:
            seen.add("checks strategy")
            if any("onFlavors" in r for r in spec["admissionChecksStrategy"]["admissionChecks"]):
                seen.add("onFlavors")
        if obj["kind"] == "Workload" and "priorityClassRef" in spec:
            seen.add("priorityClassRef")
    for step in case["steps"]:
        seen.update(k for k in step if k in ("checks", "podsReady"))
    return seen


def test_the_generator_reaches_the_kinds_added_later() -> None:
    """Admission checks with `checks` steps, waitForPodsReady with `podsReady` steps, priority classes."""
    seen: set[str] = set()
    for index in range(120):
        case = generator.generate(1, index)
        assert case == generator.generate(1, index)
        seen |= _new_kinds(case)
        for step in case["steps"]:
            for states in (step.get("checks") or {}).values():
                assert set(states.values()) <= {"Ready", "Retry", "Rejected", "Pending"}
    assert seen == {
        "waitForPodsReady",
        "blockAdmission",
        "AdmissionCheck",
        "WorkloadPriorityClass",
        "checks strategy",
        "onFlavors",
        "priorityClassRef",
        "checks",
        "podsReady",
    }


def test_a_class_reference_carries_the_class_value_and_long_pods_ready_timeouts() -> None:
    """No webhook on upstream's side: spec.priority is the class's value; the timeouts never fire in a case."""
    for index in range(120):
        case = generator.generate(2, index)
        classes = {
            o["metadata"]["name"]: o["value"] for o in case["objects"] if o["kind"] == "WorkloadPriorityClass"
        }
        workloads = [o for o in case["objects"] if o["kind"] == "Workload"]
        workloads += [o for s in case["steps"] for o in s.get("apply", []) if o["kind"] == "Workload"]
        for wl in workloads:
            ref = wl["spec"].get("priorityClassRef")
            if ref:
                assert ref["kind"] == "WorkloadPriorityClass"
                assert wl["spec"]["priority"] == classes[ref["name"]]
        wait = (case.get("config") or {}).get("waitForPodsReady")
        if wait:
            assert wait["timeout"] == wait["recoveryTimeout"] == "1h"


def test_cases_without_the_later_kinds_keep_their_old_draws() -> None:
    """The later kinds draw from a stream of their own: with it giving none of them, the case is the one
    the main stream alone gives (so earlier seeds replay as they were found)."""
    import random

    plain = 0
    for index in range(40):
        case = generator.generate(3, index)
        if _new_kinds(case):
            continue
        plain += 1
        never = random.Random(0)
        never.random = lambda: 0.99  # type: ignore[method-assign]  # no later kind, no new step
        old = generator._Case(random.Random(f"3/{index}"), f"diff 3/{index}", never).doc()
        assert case == old
    assert plain > 10


def test_generated_cases_with_the_later_kinds_run_on_pykueue() -> None:
    """The new objects are valid for pykueue's loader and runner (steps naming only existing Workloads)."""
    ran = 0
    for index in range(60):
        case = generator.generate(4, index)
        if not _new_kinds(case) & {"checks", "podsReady", "priorityClassRef", "checks strategy"}:
            continue
        if any("delete" in s or "finish" in s for s in case["steps"]):
            continue  # the driver resolves those against upstream first
        result = runner.run(loader.parse(case, f"case {index}"))
        assert "admissionChecks" in result
        ran += 1
    assert ran >= 5


def test_upstream_configuration_of_a_case() -> None:
    config = kueue_config({"fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]}})
    assert config["fairSharing"] == {"preemptionStrategies": ["LessThanInitialShare"]}
    assert config["featureGates"]["UnadmittedWorkloadsObservability"] is True
    assert "fairSharing" not in kueue_config({})
    wait = {"enable": True, "timeout": "1h", "blockAdmission": True}
    assert kueue_config({"waitForPodsReady": wait})["waitForPodsReady"] == {
        "timeout": "1h",
        "blockAdmission": True,
    }
    assert "waitForPodsReady" not in kueue_config({"waitForPodsReady": {**wait, "enable": False}})


def _view(**changes: Any) -> dict[str, Any]:
    view: dict[str, Any] = {key: {} for key in compare.KEYS}
    view.update(pending=[], finished=[], deactivated=[], preempted=[])
    view.update(changes)
    return view


def test_differences_name_the_workload_and_both_sides() -> None:
    ours = _view(admitted={"ns/a": {"clusterQueue": "cq", "podSets": {}}})
    theirs = _view(pending=["ns/a"])
    diffs = compare.differences(ours, theirs)
    assert "admitted ns/a: pykueue {'clusterQueue': 'cq', 'podSets': {}}, upstream None" in diffs
    assert "pending: pykueue [], upstream ['ns/a']" in diffs
    assert compare.differences(ours, ours) == []


def test_usage_is_compared_as_quantities_and_zero_is_nothing() -> None:
    assert compare.from_upstream(_view(clusterQueueUsage={"cq": {"f": {"cpu": "2000m", "memory": "0"}}}))[
        "clusterQueueUsage"
    ] == {"cq": {"f": {"cpu": "2"}}}


def test_shrinking_keeps_only_what_the_divergence_needs() -> None:
    case = generator.generate(5, 3)
    keys = [
        f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        for o in case["objects"]
        if o["kind"] == "Workload"
    ]
    culprit = keys[0]

    def diverges(doc: dict[str, Any]) -> bool:  # "diverges" while the culprit is there
        return any(
            o["kind"] == "Workload" and f"{o['metadata']['namespace']}/{o['metadata']['name']}" == culprit
            for o in doc["objects"]
        )

    small, _ = shrink.shrink(case, diverges, budget=500)
    workloads = [o for o in small["objects"] if o["kind"] == "Workload"]
    assert [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in workloads] == [culprit]
    assert all("settle" in s for s in small["steps"])
    loader.parse(small, "shrunk")


def _with_checkpoints(path: Path) -> dict[str, Any]:
    """A scenario file as the driver plays it: an `expect` checkpoint after every settle."""
    doc = yaml.safe_load(path.read_text())
    doc.pop("expect")
    steps = []
    for step in doc["steps"]:
        steps.append(step)
        if "settle" in step:
            steps.append({"expect": {}})
    doc["steps"] = steps
    return doc


def test_the_queue_order_of_a_preempted_workload_is_a_documented_divergence() -> None:
    """Seed 4711, case 2: upstream's view is what requeueOrder Creation gives (d05); the same case in
    the scenario format's order (d04) differs from it, and only that order explains the difference."""
    folder = ROOT / "tests" / "scenarios" / "differential"
    ours = _with_checkpoints(folder / "d04-preempted-workload-queued-at-its-eviction.yaml")
    as_upstream = _with_checkpoints(folder / "d05-as-upstream-preempted-workload-keeps-creation-order.yaml")
    theirs = compare.from_pykueue(runner.run(loader.parse(as_upstream, "d05"))["checkpoints"][1])
    mine = compare.from_pykueue(runner.run(loader.parse(ours, "d04"))["checkpoints"][1])
    assert compare.differences(mine, theirs)
    assert known.classify(ours, 1, theirs) is known.REQUEUE_ORDER
    # Any other difference is not explained by the order: upstream admitting nothing, say.
    assert known.classify(ours, 1, {**theirs, "admitted": {}}) is None


def test_a_cycle_blocked_by_block_admission_is_a_documented_divergence() -> None:
    """Seed 2718, case 10 (d06): upstream holds the blocked cycle's other head w2 (active, no reason), pykueue
    parks it with NoMatchingFlavor; only that explains the difference, and only with blockAdmission."""
    doc = _with_checkpoints(
        ROOT / "tests" / "scenarios" / "differential" / "d06-blocked-cycle-parks-its-other-heads.yaml"
    )
    doc.pop("divergence")
    ours = compare.from_pykueue(runner.run(loader.parse(doc, "d06"))["checkpoints"][0])
    assert ours["pendingReason"]["team-b/w2"] == "NoMatchingFlavor"
    theirs = {
        **ours,
        "queues": {"active": {"cq0": ["team-b/w2"], "cq2": ["team-a/w1"]}, "inadmissible": {}},
        "pendingReason": {"team-a/w1": "WaitingForPodsReady"},
    }
    assert compare.differences(ours, theirs)
    assert known.classify(doc, 0, theirs) is known.BLOCKED_CYCLE
    assert known.classify(doc, 0, {**theirs, "admitted": {}}) is None
    unblocked = {**doc, "config": {**doc["config"], "waitForPodsReady": {"enable": True, "timeout": "1h"}}}
    assert known.classify(unblocked, 0, theirs) is None


def test_a_retry_requeued_after_others_took_the_quota_is_a_documented_divergence() -> None:
    """Seed 3141, case 1 (d07): after w2's Retry pykueue admits w2 again; upstream gave the quota to w1."""
    doc = _with_checkpoints(
        ROOT
        / "tests"
        / "scenarios"
        / "differential"
        / "d07-retry-check-requeues-after-others-took-the-quota.yaml"
    )
    doc.pop("divergence")
    ours = compare.from_pykueue(runner.run(loader.parse(doc, "d07"))["checkpoints"][1])
    assert "team-b/w2" in ours["admitted"]
    theirs = {
        **ours,
        "admitted": {
            "team-a/w1": {"clusterQueue": "cq0", "podSets": {"ps0": {"count": 2, "flavors": {"cpu": "f0"}}}}
        },
        "pending": ["team-b/w2"],
        "quotaOnly": ["team-a/w1"],
    }
    assert known.classify(doc, 1, theirs) is known.RETRY_REQUEUE
    assert (
        known.classify(doc, 1, {**theirs, "finished": ["team-b/w2"]}) is None
    )  # more than the quota differs
    assert known.classify(doc, 0, theirs) is None  # no Retry before the first step end
