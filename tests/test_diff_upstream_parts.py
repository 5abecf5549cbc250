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

import pytest  # noqa: E402
import yaml  # noqa: E402
from benchmarks.diff_upstream import compare, generator, known, shrink  # noqa: E402
from benchmarks.diff_upstream.parallel import CaseReport, Report, deal, resolve, run_parallel  # noqa: E402
from benchmarks.diff_upstream.upstream import _usage_lags, kueue_config  # noqa: E402

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


def test_cases_are_dealt_round_robin_each_once() -> None:
    assert deal(10, 7, 3) == [[10, 13, 16], [11, 14], [12, 15]]
    assert deal(0, 2, 4) == [[0], [1]]  # no worker without a case
    assert deal(0, 5, 1) == [[0, 1, 2, 3, 4]]
    assert sorted(i for share in deal(5, 100, 4) for i in share) == list(range(5, 105))


def _reports(order: list[int]) -> tuple[list[str], str, int]:
    lines: list[str] = []
    report = Report(3, 5, emit=lines.append)
    kinds = {3: (False, False), 4: (True, True), 5: (False, False), 6: (True, False), 7: (True, True)}
    for index in order:
        divergent, documented = kinds[index]
        extra = ("  shrunk",) if divergent else ()
        report.add(CaseReport(index, (f"case {index}", *extra), divergent=divergent, documented=documented))
    assert report.complete
    return lines, report.last_line(), report.exit_status


def test_the_report_is_the_same_whatever_order_the_workers_finish_in() -> None:
    serial = _reports([3, 4, 5, 6, 7])
    assert serial[1] == "5 cases, 3 divergences (2 documented)"
    assert serial[2] == 1
    # Three workers dealt [3, 6], [4, 7], [5]: their reports interleave in any order.
    assert _reports([4, 5, 3, 7, 6]) == serial
    assert _reports([7, 6, 5, 4, 3]) == serial


def test_a_case_reported_twice_or_unknown_is_refused() -> None:
    import pytest

    report = Report(0, 2, emit=lambda _: None)
    report.add(CaseReport(0, ("case 0",)))
    with pytest.raises(ValueError, match="twice"):
        report.add(CaseReport(0, ("case 0",)))
    with pytest.raises(ValueError, match="not expected"):
        report.add(CaseReport(2, ("case 2",)))
    assert not report.complete


FAKE_PLAYER = """
import time
from benchmarks.diff_upstream.parallel import CaseReport

def player(*, fail_at=-1):
    def play_share(indexes):
        for index in indexes:
            if index == fail_at:
                raise RuntimeError(f"case {index} broke")
            time.sleep(0.05 * (index % 3))  # the workers finish out of order
            yield CaseReport(index, (f"case {index}",), divergent=index % 2 == 1, documented=index % 4 == 1)
    return play_share
"""


def test_workers_in_processes_report_as_one_serial_run(tmp_path: Path, monkeypatch: Any) -> None:
    """The real worker machinery (spawned processes, the result queue) with a stand-in for the API server."""
    (tmp_path / "fake_diff_player.py").write_text(FAKE_PLAYER)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers get the driver's sys.path
    serial: list[str] = []
    one = Report(0, 9, emit=serial.append)
    for case_report in resolve("fake_diff_player:player")()(deal(0, 9, 1)[0]):
        one.add(case_report)
    parallel_lines: list[str] = []
    three = Report(0, 9, emit=parallel_lines.append)
    run_parallel("fake_diff_player:player", {}, deal(0, 9, 3), three)
    assert three.complete
    assert (parallel_lines, three.last_line()) == (serial, one.last_line())
    assert three.last_line() == "9 cases, 4 divergences (2 documented)"
    with pytest.raises(RuntimeError, match="case 4 broke"):
        run_parallel("fake_diff_player:player", {"fail_at": 4}, deal(0, 9, 3), Report(0, 9, emit=print))


def test_a_workload_upstream_retries_after_nomination_is_a_documented_divergence() -> None:
    """Seed 8081, case 43 (d08): upstream keeps w5 in its active queue, pykueue parks it; nothing else
    differs, and w5 could preempt the lower-priority w4 in its BestEffortFIFO ClusterQueue."""
    path = (
        ROOT
        / "tests"
        / "scenarios"
        / "differential"
        / "d08-waiting-for-quota-it-could-preempt-for-is-parked.yaml"
    )
    doc = yaml.safe_load(path.read_text())
    doc.pop("expect")
    doc["steps"] = [*doc["steps"], {"expect": {}}]
    ours = compare.from_pykueue(runner.run(loader.parse(doc, "d08"))["checkpoints"][0])
    assert ours["queues"] == {"active": {}, "inadmissible": {"cq0": ["team-a/w5"]}}
    theirs = {**ours, "queues": {"active": {"cq0": ["team-a/w5"]}, "inadmissible": {}}}
    assert known.classify(doc, 0, theirs) is known.RETRIED_AFTER_NOMINATION
    # Not when anything else differs, nor the other way round, nor without a lower-priority Workload.
    assert known.classify(doc, 0, {**theirs, "pendingReason": {"team-a/w5": "NoMatchingFlavor"}}) is None
    assert known.classify(doc, 0, {**theirs, "admitted": {}}) is None
    for obj in doc["objects"]:
        if obj["kind"] == "Workload" and obj["metadata"]["name"] == "w4":
            obj["spec"]["priority"] = 2
    assert known.classify(doc, 0, theirs) is None


def test_a_workload_retried_after_upstreams_start_is_a_documented_divergence() -> None:
    """Seed 6021, case 29 (d10): pykueue parks w7 with the reason of f1, where its resumed scan went;
    upstream's queue manager retries it once more a second after its start, from f0: WaitingForQuota."""
    doc = _with_checkpoints(
        ROOT / "tests" / "scenarios" / "differential" / "d10-timing-parked-workload-retried-after-start.yaml"
    )
    doc.pop("divergence")
    ours = compare.from_pykueue(runner.run(loader.parse(doc, "d10"))["checkpoints"][0])
    assert ours["pendingReason"] == {"team-b/w7": "ExceedsMaxQuota"}
    theirs = {**ours, "pendingReason": {"team-b/w7": "WaitingForQuota"}}
    assert known.classify(doc, 0, theirs) is known.RETRIED_AFTER_START
    # Not a reason the retry does not give, nor anything else differing.
    assert known.classify(doc, 0, {**theirs, "pendingReason": {"team-b/w7": "NoMatchingFlavor"}}) is None
    assert known.classify(doc, 0, {**theirs, "admitted": {}}) is None


def test_a_workload_admitted_on_upstreams_retry_after_its_start_is_a_documented_divergence() -> None:
    """Seed 8081, case 144 (d12): pykueue parks w6 (NoMatchingFlavor, its resumed scan reached f1); the
    retry upstream makes a second after its start admits it with 1 pod on f0."""
    doc = _with_checkpoints(
        ROOT
        / "tests"
        / "scenarios"
        / "differential"
        / "d12-timing-parked-partial-workload-admitted-on-upstreams-retry.yaml"
    )
    doc.pop("divergence")
    ours = compare.from_pykueue(runner.run(loader.parse(doc, "d12"))["checkpoints"][0])
    assert ours["pendingReason"] == {"team-b/w6": "NoMatchingFlavor"}
    w6 = {"clusterQueue": "cq1", "podSets": {"ps0": {"count": 1, "flavors": {"cpu": "f0"}}}}
    theirs = {
        **ours,
        "admitted": {**ours["admitted"], "team-b/w6": w6},
        "pending": [],
        "queues": {"active": {}, "inadmissible": {}},
        "pendingReason": {},
        "clusterQueueUsage": {**ours["clusterQueueUsage"], "cq1": {"f0": {"cpu": "3"}}},
    }
    assert known.classify(doc, 0, theirs) is known.RETRIED_AFTER_START
    w6_two = {"clusterQueue": "cq1", "podSets": {"ps0": {"count": 2, "flavors": {"cpu": "f0"}}}}
    assert known.classify(doc, 0, {**theirs, "admitted": {**ours["admitted"], "team-b/w6": w6_two}}) is None


def test_tied_heads_of_two_cluster_queues_in_the_other_order_are_a_documented_divergence() -> None:
    """Seed 7331, case 9 (d11): pykueue takes w1 (cq2) before w4 (cq1) by uid; upstream took w4 first and its
    blocked cycle held w3 (no reason). Only while the two tie: not once w4 is a second younger."""
    doc = _with_checkpoints(
        ROOT
        / "tests"
        / "scenarios"
        / "differential"
        / "d11-timing-tied-heads-of-two-queues-in-either-order.yaml"
    )
    doc.pop("divergence")
    ours = compare.from_pykueue(runner.run(loader.parse(doc, "d11"))["checkpoints"][0])
    assert "team-a/w1" in ours["admitted"]
    swapped = known._ranked(doc, {"cq1": 0, "cq2": 1})
    theirs = compare.from_pykueue(runner.run(loader.parse(swapped, "d11"))["checkpoints"][0])
    assert "team-b/w4" in theirs["admitted"]
    assert theirs["pendingReason"]["team-a/w3"] == "WaitingForQuota"
    assert known.classify(doc, 0, theirs) is known.TIE_ORDER
    # Upstream's view: w3 held by the blocked cycle, its status unwritten.
    held = {k: v for k, v in theirs["pendingReason"].items() if k != "team-a/w3"}
    assert known.classify(doc, 0, {**theirs, "pendingReason": held}) is known.TIE_ORDER
    assert known.classify(doc, 0, {**theirs, "admitted": {}}) is None
    for obj in doc["objects"]:
        if obj["kind"] == "Workload" and obj["metadata"]["name"] == "w4":
            obj["metadata"]["creationTimestamp"] = "2026-12-07T21:37:42Z"
    assert known.classify(doc, 0, theirs) is None


def _reserving(cq: str, flavor: str, usage: dict[str, str], *conds: str) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [{"type": c, "status": "True"} for c in ("QuotaReserved", *conds)],
            "admission": {
                "clusterQueue": cq,
                "podSetAssignments": [{"flavors": dict.fromkeys(usage, flavor), "resourceUsage": usage}],
            },
        }
    }


def test_a_step_waits_while_a_queue_status_lags_behind_its_workloads() -> None:
    wls = [
        _reserving("cq0", "f0", {"cpu": "500m", "pods": "1"}),
        _reserving("cq0", "f0", {"cpu": "1500m", "pods": "3"}),
        _reserving("cq0", "f1", {"cpu": "4"}, "Finished"),  # gave its quota back
        {"status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}},
    ]
    caught_up = {"cq0": {"f0": {"cpu": "2", "pods": "4"}, "f1": {"cpu": "0"}}, "cq1": {}}
    assert not _usage_lags(wls, caught_up)
    assert _usage_lags(wls, {"cq0": {"f0": {"cpu": "500m", "pods": "1"}}})  # the second not written yet
    assert _usage_lags(wls, {})
    assert not _usage_lags([], {"cq0": {"f0": {"cpu": "0"}}})


def test_an_api_error_in_a_case_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    from benchmarks.diff_upstream.__main__ import run_case

    from pykueue.devcluster.controlplane import ApiError

    class Refusing:
        def play(self, case: dict[str, Any]) -> Any:
            raise ApiError("PATCH", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/w3", 404, {})

    report = run_case(Refusing(), 5, 3, out=tmp_path, repeat=0, shrink_budget=0)  # type: ignore[arg-type]
    assert report.divergent and not report.documented
    assert report.lines[0].startswith("case 5/3: upstream failed: PATCH")
