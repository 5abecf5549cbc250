"""Every scenario file runs through the engine and matches its `expect` blocks.

The shared public scenarios (../shared/scenarios/public, next to the repository) and
the project's own (tests/scenarios/**) run the way `pykueue scenario check` runs them:
loader.load, runner.run, then scenario_command.check. Plus the CLI's promises:
`scenario run --json` is deterministic byte for byte, and an invalid file is a clear
error naming the file and the place in it, with no partial output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.cli.scenario_command import check
from pykueue.engine.events import ADMITTED, EVICTED, PREEMPTED, Event
from pykueue.engine.state import State
from pykueue.errors import InputError
from pykueue.scenario import loader, report, runner

ROOT = Path(__file__).parents[1]
PUBLIC = ROOT.parent / "shared" / "scenarios" / "public"
OWN = ROOT / "tests" / "scenarios"


def _public_files() -> list[Path]:
    if not PUBLIC.is_dir():
        raise RuntimeError(f"the shared public scenarios are missing: {PUBLIC} is not a directory")
    return sorted([*PUBLIC.glob("*.yaml"), *PUBLIC.glob("*.yml")])


def _own_files() -> list[Path]:
    return sorted([*OWN.rglob("*.yaml"), *OWN.rglob("*.yml")])


def _params(files: list[Path], base: Path) -> list[object]:
    return [pytest.param(path, id=str(path.relative_to(base))) for path in files]


def test_public_scenarios_are_there() -> None:
    assert PUBLIC.is_dir(), f"the shared public scenarios are missing: {PUBLIC}"
    assert _public_files(), f"no scenario files in {PUBLIC}"


def _run_and_check(path: Path) -> None:
    scenario = loader.load(path)
    document = runner.run(scenario)
    problems = check(scenario, document)
    assert not problems, f"{path}: {scenario.name}\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", _params(_public_files(), PUBLIC))
def test_public_scenario(path: Path) -> None:
    _run_and_check(path)


@pytest.mark.parametrize("path", _params(_own_files(), OWN))
def test_own_scenario(path: Path) -> None:
    _run_and_check(path)


cli = CliRunner()


@pytest.mark.parametrize("path", _params(_public_files(), PUBLIC))
def test_scenario_run_json_is_byte_for_byte_deterministic(path: Path) -> None:
    first = cli.invoke(app, ["scenario", "run", str(path), "--json"])
    second = cli.invoke(app, ["scenario", "run", str(path), "--json"])
    assert first.exit_code == 0, first.output
    assert first.stdout_bytes == second.stdout_bytes
    document = json.loads(first.stdout)
    assert document["format"] == 1
    for key in (
        "admitted",
        "preempted",
        "pending",
        "inadmissible",
        "finished",
        "conditions",
        "events",
        "admissionChecks",
        "requeueState",
        "deactivated",
    ):
        assert key in document


def test_scenario_run_json_of_several_files_is_a_list_and_deterministic() -> None:
    files = [str(p) for p in _public_files()]
    first = cli.invoke(app, ["scenario", "run", *files, "--json"])
    second = cli.invoke(app, ["scenario", "run", *files, "--json"])
    assert first.exit_code == 0, first.output
    assert first.stdout_bytes == second.stdout_bytes
    documents = json.loads(first.stdout)
    assert isinstance(documents, list)
    assert len(documents) == len(files)


def test_scenario_run_json_is_identical_across_processes_with_other_hash_seeds() -> None:
    """Set and dict orders must not leak into the output: two processes, two PYTHONHASHSEEDs."""
    files = [str(p) for p in [*_public_files(), *_own_files()] if _loads(p)]
    outputs = []
    for seed in ("1", "2"):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from pykueue.cli.main import main; main()",
                "scenario",
                "run",
                *files,
                "--json",
            ],
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]


def _loads(path: Path) -> bool:
    """Does the file load and run (files other developers are still writing may not)?"""
    try:
        runner.run(loader.load(path))
    except InputError:
        return False
    return True


VALID = """\
format: 1
name: a valid scenario
objects:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: default}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ClusterQueue
  metadata: {name: cq}
  spec:
    namespaceSelector: {}
    resourceGroups:
    - coveredResources: [cpu]
      flavors:
      - name: default
        resources: [{name: cpu, nominalQuota: "4"}]
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {name: lq, namespace: team}
  spec: {clusterQueue: cq}
steps:
- cycle: 1
"""

INVALID = {
    # case: (text replacement applied to VALID, the place named right after the file, other words)
    "unknown-step": (("- cycle: 1", "- jump: 1"), "steps[0]", ["jump"]),
    "bad-quantity": (('nominalQuota: "4"', 'nominalQuota: "four"'), "objects[1]", ["nominalQuota", "four"]),
    "unknown-kind": (("kind: ResourceFlavor", "kind: ResourceFlavour"), "objects[0]", ["ResourceFlavour"]),
    "missing-name": (("name: a valid scenario\n", ""), "name", []),
    "unknown-top-level-key": (("format: 1\n", "format: 1\nsurprise: true\n"), "", ["surprise"]),
    "unknown-own-option": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {nominalFirts: true}\n"),
        "config.pykueue",
        ["nominalFirts"],
    ),
    "own-option-not-a-bool": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {nominalFirst: 'yes'}\n"),
        "config.pykueue.nominalFirst",
        [],
    ),
    "requeue-order-unknown": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {requeueOrder: Arrival}\n"),
        "config.pykueue.requeueOrder",
        ["Eviction", "Creation"],
    ),
    "default-contract-unknown-field": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {preemptionContract: {minRuntime: 1m}}\n"),
        "config.pykueue.preemptionContract.minRuntime",
        ["unknown field"],
    ),
    "default-contract-bad-duration": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {preemptionContract: {minRunTime: soon}}\n"),
        "config.pykueue.preemptionContract.minRunTime",
        ["soon"],
    ),
    "default-contract-window-alone": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {preemptionContract: {window: 24h}}\n"),
        "config.pykueue.preemptionContract",
        ["maxPreemptions and window"],
    ),
    "default-contract-not-a-mapping": (
        ("format: 1\n", "format: 1\nconfig:\n  pykueue: {preemptionContract: 10m}\n"),
        "config.pykueue.preemptionContract",
        ["mapping"],
    ),
    "config-resources-bad-strategy": (
        (
            "format: 1\n",
            "format: 1\nconfig:\n  resources: {transformations: [{input: cpu, strategy: Keep}]}\n",
        ),
        "config.resources.transformations[0].strategy",
        ["Retain or Replace"],
    ),
    "config-resources-unknown-key": (
        ("format: 1\n", "format: 1\nconfig:\n  resources: {deviceClassMappings: []}\n"),
        "config.resources",
        ["deviceClassMappings"],
    ),
    "topology-assignment-without-levels": (
        (
            "- cycle: 1\n",
            "- cycle: 1\nexpect:\n  admitted: {team/w: {podSets: {main: {topologyAssignment: {domains: []}}}}}\n",
        ),
        "expect.admitted[team/w].podSets.main.topologyAssignment.levels",
        [],
    ),
    "topology-domain-values-per-level": (
        (
            "- cycle: 1\n",
            "- cycle: 1\nexpect:\n  admitted: {team/w: {podSets: {main: {topologyAssignment: "
            "{levels: [rack, kubernetes.io/hostname], domains: [{values: [x1], count: 1}]}}}}}\n",
        ),
        "expect.admitted[team/w].podSets.main.topologyAssignment.domains[0].values",
        ["one value per level"],
    ),
    "unknown-key-inside-expect": (
        ("- cycle: 1\n", "- cycle: 1\nexpect:\n  admitted: {team/w: {clusterQueues: cq}}\n"),
        "expect.admitted[team/w]",
        ["clusterQueues"],
    ),
    "unknown-key-inside-a-checkpoint": (
        ("- cycle: 1\n", "- cycle: 1\n- expect: {requeueState: {team/w: {counts: 1}}}\n"),
        "steps[1].expect.requeueState[team/w]",
        ["counts"],
    ),
    "unknown-wait-for-pods-ready-key": (
        ("format: 1\n", "format: 1\nconfig:\n  waitForPodsReady: {timeot: 5m}\n"),
        "config.waitForPodsReady",
        ["timeot"],
    ),
    "bad-requeuing-timestamp": (
        (
            "format: 1\n",
            "format: 1\nconfig:\n  waitForPodsReady: {requeuingStrategy: {timestamp: Admission}}\n",
        ),
        "config.waitForPodsReady.requeuingStrategy.timestamp",
        ["Admission"],
    ),
    "unknown-check-state": (
        ("- cycle: 1\n", "- checks: {team/w: {prov: Approved}}\n"),
        "steps[0].checks[team/w].prov",
        ["Approved"],
    ),
    "pods-ready-not-a-list": (("- cycle: 1\n", "- podsReady: team/w\n"), "steps[0].podsReady", []),
    "divergence-without-reason": (
        ("format: 1\n", "format: 1\ndivergence: {upstreamVersion: v0.19.2}\n"),
        "divergence reason",
        ["required"],
    ),
    "divergence-unknown-key": (
        ("format: 1\n", "format: 1\ndivergence: {reason: chosen, upstreem: {}}\n"),
        "divergence",
        ["upstreem"],
    ),
    "divergence-upstream-not-an-expect": (
        ("format: 1\n", "format: 1\ndivergence: {reason: chosen, upstream: {admited: {}}}\n"),
        "divergence upstream",
        ["admited"],
    ),
    "divergence-timing-not-a-bool": (
        ("format: 1\n", "format: 1\ndivergence: {reason: chosen, timing: sometimes}\n"),
        "divergence timing",
        [],
    ),
    "misspelt-feature-gate": (
        ("format: 1\n", "format: 1\nconfig:\n  featureGates: {PartialAdmision: false}\n"),
        "config.featureGates",
        ["PartialAdmision"],
    ),
}


def test_the_valid_base_of_the_invalid_files_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "valid.yaml"
    path.write_text(VALID, encoding="utf-8")
    result = cli.invoke(app, ["scenario", "run", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["name"] == "a valid scenario"


def test_a_divergence_block_is_read_and_only_expect_is_checked(tmp_path: Path) -> None:
    """FORMAT.md's `divergence` holds upstream's result; `scenario check` compares pykueue's (`expect`)."""
    path = tmp_path / "divergence.yaml"
    text = VALID.replace(
        "format: 1\n",
        "format: 1\ndivergence:\n  reason: chosen\n  upstreamVersion: v0.19.2\n  timing: false\n"
        "  upstream: {admitted: {team/x: {clusterQueue: cq}}}\n",
    )
    path.write_text(text + "expect: {admitted: {}}\n", encoding="utf-8")
    result = cli.invoke(app, ["scenario", "check", str(path)])
    assert result.exit_code == 0, result.output


def _names_the_place(message: str, path: Path, where: str, words: list[str]) -> None:
    place = f"{path} {where}" if where else f"{path}:"
    assert place in message, f"expected {place!r} in {message!r}"
    for word in words:
        assert word in message, f"expected {word!r} in {message!r}"


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_scenario_is_a_clear_error_and_no_json(tmp_path: Path, case: str) -> None:
    (old, new), where, words = INVALID[case]
    assert old in VALID
    path = tmp_path / "scenario.yaml"
    path.write_text(VALID.replace(old, new), encoding="utf-8")

    with pytest.raises(loader.ScenarioError) as info:
        runner.run(loader.load(path))
    _names_the_place(str(info.value), path, where, words)

    result = cli.invoke(app, ["scenario", "run", str(path), "--json"])
    assert result.exit_code != 0
    assert result.stdout.strip() == "", f"partial output on stdout: {result.stdout!r}"
    _names_the_place(result.stderr, path, where, words)
    assert "Traceback" not in result.output

    checked = cli.invoke(app, ["scenario", "check", str(path)])
    assert checked.exit_code != 0
    _names_the_place(checked.stderr, path, where, words)


def test_one_invalid_file_among_valid_ones_gives_no_partial_result(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(VALID, encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(VALID.replace("- cycle: 1", "- jump: 1"), encoding="utf-8")
    result = cli.invoke(app, ["scenario", "run", str(good), str(bad), "--json"])
    assert result.exit_code != 0
    assert result.stdout.strip() == ""
    assert str(bad) in result.stderr


def test_scenario_events_keep_to_the_types_format_md_defines() -> None:
    """The engine records Evicted events (metrics count them), but the document lists only
    Admitted, Preempted, Pending and Finished events, as FORMAT.md defines them."""
    state = State()
    state.events.extend(
        [
            Event(1, "ns/a", ADMITTED, "admitted"),
            Event(2, "ns/a", EVICTED, "drained", "ClusterQueueStopped", "cq"),
            Event(2, "ns/b", PREEMPTED, "preempted"),
        ]
    )
    document = report.snapshot(state, with_events=True)
    assert [(e["workload"], e["type"]) for e in document["events"]] == [
        ("ns/a", "Admitted"),
        ("ns/b", "Preempted"),
    ]


def _topology_workload(pod_set_extra: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, **pod_set_extra}]},
        "status": status,
    }


def test_a_delayed_topology_request_is_read_and_a_bad_state_refused_with_the_key_named() -> None:
    def status(state: str) -> dict[str, Any]:
        return {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {}, "delayedTopologyRequest": state}],
            }
        }

    loader.parse(
        {"format": 1, "name": "t", "objects": [_topology_workload({}, status("Pending"))]}, "file.yaml"
    )
    doc = {"format": 1, "name": "topology", "objects": [_topology_workload({}, status("Soon"))]}
    with pytest.raises(loader.ScenarioError) as info:
        loader.parse(doc, "file.yaml")
    message = str(info.value)
    assert message.startswith("file.yaml objects[0]"), message
    assert "delayedTopologyRequest" in message, message


TOPOLOGY_INPUTS = {
    "pod set annotation": (
        {"template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}}}},
        {},
    ),
    "topology request": ({"topologyRequest": {"required": "rack"}}, {}),
    "unhealthy nodes": ({}, {"unhealthyNodes": [{"name": "n1"}]}),
}


@pytest.mark.parametrize("case", sorted(TOPOLOGY_INPUTS))
def test_a_workload_using_topology_is_read(case: str) -> None:
    pod_set_extra, status = TOPOLOGY_INPUTS[case]
    doc = {"format": 1, "name": "topology", "objects": [_topology_workload(pod_set_extra, status)]}
    scenario = loader.parse(doc, "file.yaml")
    document = runner.run(scenario)
    assert document["pending"] == {} and document["admitted"] == {}


def test_every_new_key_is_in_the_json_output_and_empty_when_nothing() -> None:
    document = runner.run(loader.parse(yaml.safe_load(VALID), "valid.yaml"))
    assert (document["admissionChecks"], document["requeueState"], document["deactivated"]) == ({}, {}, [])


HOST = "kubernetes.io/hostname"


def _assignment(levels: list[str], *domains: tuple[list[str], int]) -> dict[str, Any]:
    return {"levels": levels, "domains": [{"values": v, "count": c} for v, c in domains]}


def test_an_assignment_spelled_with_every_level_equals_its_hostname_column() -> None:
    ours = _assignment([HOST], (["x2"], 1), (["x1"], 2))
    spelled = _assignment(["block", "rack", HOST], (["b1", "r1", "x1"], 2), (["b1", "r2", "x2"], 1))
    problems: list[str] = []
    report._compare_topology(spelled, ours, "admitted", problems)
    assert problems == []
    other_host = _assignment(["block", "rack", HOST], (["b1", "r1", "x1"], 2), (["b1", "r2", "x3"], 1))
    report._compare_topology(other_host, ours, "admitted", problems)
    assert len(problems) == 1
    # Without hostnames at the bottom, the levels must match exactly.
    racks = _assignment(["block", "rack"], (["b1", "r1"], 3))
    problems.clear()
    report._compare_topology(racks, _assignment(["rack"], (["r1"], 3)), "admitted", problems)
    assert len(problems) == 1


def test_the_json_output_lists_topology_domains_sorted_by_their_values() -> None:
    seen = 0
    for path in sorted((Path(__file__).parent / "scenarios" / "topology").glob("*.yaml")):
        out = runner.run(loader.load(path))
        for admitted in out["admitted"].values():
            for pod_set in admitted["podSets"].values():
                domains = pod_set.get("topologyAssignment", {}).get("domains", [])
                seen += len(domains) > 1
                assert [d["values"] for d in domains] == sorted(d["values"] for d in domains)
    assert seen, "no topology scenario admitted a pod set across several domains"
