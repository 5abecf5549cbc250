"""LoadOptions: the API server's strictness by default, RELAXED for upstream-test-style input."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.api import manifests
from pykueue.api.workload import Workload
from pykueue.errors import ValidationError
from pykueue.scenario import shapes

from . import samples
from .samples import with_

SCENARIO_DIRS = [Path(__file__).parents[1] / "scenarios", Path(__file__).parents[3] / "shared" / "scenarios"]


def two_variable_pod_sets() -> dict[str, Any]:
    doc = samples.workload()
    del doc["status"]
    second = dict(doc["spec"]["podSets"][0], name="second")
    doc["spec"]["podSets"].append(second)
    return doc


def test_upper_case_names_are_refused_by_default_and_accepted_relaxed() -> None:
    doc = with_(samples.cluster_queue(), "metadata.name", "ClusterQueueA")
    doc = with_(doc, "spec.cohortName", "ROOT")
    for path in ("metadata.name", "spec.cohortName"):
        with pytest.raises(ValidationError) as err:
            manifests.parse_object(with_(samples.cluster_queue(), path, doc["metadata"]["name"]))
        assert [p.path for p in err.value.problems] == [path]
    assert manifests.parse_object(doc, options=manifests.RELAXED).metadata.name == "ClusterQueueA"


def test_relaxed_still_checks_everything_else() -> None:
    doc = with_(samples.cluster_queue(), "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "99")
    with pytest.raises(ValidationError):
        manifests.parse_object(doc, options=manifests.RELAXED)


def test_several_variable_pod_sets_only_when_relaxed() -> None:
    with pytest.raises(ValidationError):
        manifests.parse_object(two_variable_pod_sets())
    manifests.parse_object(two_variable_pod_sets(), options=manifests.RELAXED)


def test_partial_admission_gate_off_clears_min_count_before_validation() -> None:
    options = manifests.LoadOptions(feature_gates={"PartialAdmission": False})
    wl = manifests.parse_object(two_variable_pod_sets(), options=options)
    assert isinstance(wl, Workload)
    assert [ps.min_count for ps in wl.spec.pod_sets] == [None, None]
    on = manifests.parse_object(samples.workload())
    assert isinstance(on, Workload)
    assert on.spec.pod_sets[0].min_count == 2


def _scenario_objects() -> list[tuple[str, dict[str, Any], dict[str, bool]]]:
    found = []
    for directory in SCENARIO_DIRS:
        for path in sorted(directory.rglob("*.yaml")):
            scenario = yaml.safe_load(path.read_text())
            if not isinstance(scenario, dict) or "objects" not in scenario:
                continue
            gates = (scenario.get("config") or {}).get("featureGates") or {}
            docs = list(scenario.get("objects") or [])
            for step in scenario.get("steps") or []:
                if isinstance(step, dict) and isinstance(step.get("apply"), list):
                    docs.extend(step["apply"])
            found.extend((f"{path.name}#{i}", doc, gates) for i, doc in enumerate(docs))
    return found


def test_every_object_of_the_project_scenarios_loads_relaxed() -> None:
    objects = _scenario_objects()
    assert objects, "no scenario files found under tests/scenarios"
    failures = []
    for source, doc, gates in objects:
        options = dataclasses.replace(manifests.RELAXED, feature_gates=gates)
        # The scenario loader's one rewrite: input topology assignments may use levels+domains.
        doc = shapes.topology_domains_as_slices(doc)
        try:
            manifests.parse_object(doc, source, options)
        except ValidationError as err:
            failures.extend(str(p) for p in err.problems)
    assert failures == []
