"""JobSet manifests: what JobSet's webhook and the Job rules refuse, each problem with its field."""

from __future__ import annotations

from typing import Any

import pytest

from pykueue.api import manifests
from pykueue.errors import ValidationError

POD = {"spec": {"containers": [{"name": "m", "command": ["true"]}]}}


def _jobset(*names: str, **spec: Any) -> dict[str, Any]:
    jobs = [{"name": n, "template": {"spec": {"parallelism": 1, "template": POD}}} for n in names]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": jobs, **spec},
    }


def _problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as err:
        manifests.parse_object(doc, "f.yaml#1")
    return [f"{p.path}: {p.message}" for p in err.value.problems]


def test_a_valid_jobset_round_trips_with_unmodelled_fields_kept() -> None:
    doc = _jobset(
        "driver",
        "workers",
        network={"enableDNSHostnames": True},
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    wire = manifests.to_manifest(manifests.parse_object(doc, "f.yaml#1"))
    assert wire["metadata"]["namespace"] == "default"
    assert wire["spec"]["network"] == {"enableDNSHostnames": True}
    assert [rj["name"] for rj in wire["spec"]["replicatedJobs"]] == ["driver", "workers"]
    assert wire["spec"]["replicatedJobs"][0]["replicas"] == 1  # JobSet's default


def test_names_policies_and_counts_are_checked_with_their_paths() -> None:
    problems = _problems(_jobset("Driver", "w", "w", successPolicy={"targetReplicatedJobs": ["nope"]}))
    assert any(p.startswith("spec.replicatedJobs[0].name: ") for p in problems), problems
    assert "spec.replicatedJobs[2].name: duplicate replicated job name 'w'" in problems
    assert any(p.startswith("spec.successPolicy.targetReplicatedJobs[0]: 'nope' is not") for p in problems)

    negative = _jobset("a")
    negative["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = -1
    assert _problems(negative) == [
        "spec.replicatedJobs[0].template.spec.parallelism: invalid value -1: must be greater than or equal to 0"
    ]
    assert any(
        p.startswith("spec.successPolicy.operator: ")
        for p in _problems(_jobset("a", successPolicy={"operator": "Some"}))
    )
    assert any(
        p.startswith("spec.failurePolicy.maxRestarts: ")
        for p in _problems(_jobset("a", failurePolicy={"maxRestarts": -1}))
    )
    assert any(p.startswith("spec.replicatedJobs: ") for p in _problems(_jobset()))
