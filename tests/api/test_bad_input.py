"""Bad input gives one clear error naming the file, document, object and field; never a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from pykueue.api import manifests
from pykueue.errors import InputError, ParseError, ValidationError

from . import samples


def load_problems(text: str, source: str = "f.yaml") -> list[str]:
    with pytest.raises(ValidationError) as err:
        manifests.load_text(text, source)
    return [str(p) for p in err.value.problems]


def test_malformed_yaml_is_a_parse_error_with_position() -> None:
    with pytest.raises(ParseError) as err:
        manifests.load_text("kind: ClusterQueue\nmetadata: {name: [oops\n", "bad.yaml")
    assert str(err.value).startswith("bad.yaml: line ")
    assert "not valid YAML" in str(err.value)


def test_python_tags_are_refused() -> None:
    with pytest.raises(ParseError):
        manifests.load_text("!!python/object/apply:os.system ['true']\n", "evil.yaml")


def test_non_mapping_documents() -> None:
    assert load_problems("- a\n- b\n") == ["f.yaml#1: a manifest must be a mapping, not a list"]
    assert load_problems("just text\n") == ["f.yaml#1: a manifest must be a mapping, not a string"]


def test_missing_api_version_and_kind() -> None:
    problems = load_problems("metadata: {name: x}\n")
    assert any("apiVersion: required field is missing" in p for p in problems)
    assert any("kind: required field is missing" in p for p in problems)


def test_unknown_kind_lists_the_known_ones() -> None:
    (problem,) = load_problems("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Bucket\nmetadata: {name: x}\n")
    assert "unknown kind 'Bucket'" in problem
    assert "ClusterQueue" in problem


def test_queue_kind_points_to_local_queue() -> None:
    (problem,) = load_problems("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\n")
    assert "use kind: LocalQueue" in problem


def test_unserved_api_version() -> None:
    (problem,) = load_problems(
        "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: q}\n"
    )
    assert "apiVersion: ClusterQueue is not served as kueue.x-k8s.io/v1alpha1" in problem


def test_unknown_fields_are_refused_with_their_path() -> None:
    doc = samples.with_(
        samples.cluster_queue(), "spec.resourceGroups[0].flavors[1].resources[0].nominal", "1"
    )
    (problem,) = load_problems(yaml.safe_dump(doc))
    assert problem == (
        "f.yaml#1 ClusterQueue/research-a spec.resourceGroups[0].flavors[1].resources[0].nominal: unknown field"
    )


def test_wrong_types_say_what_was_found() -> None:
    doc = samples.with_(samples.workload(), "spec.podSets[0].count", "4")
    (problem,) = load_problems(yaml.safe_dump(doc))
    assert (
        problem
        == "f.yaml#1 Workload/team-a/job-a spec.podSets[0].count: Input should be a valid integer (got '4')"
    )
    doc = samples.with_(samples.cluster_queue(), "spec.resourceGroups", {"a": 1})
    (problem,) = load_problems(yaml.safe_dump(doc))
    assert "spec.resourceGroups: Input should be a valid list (got a mapping)" in problem


def test_invalid_quantity() -> None:
    doc = samples.with_(
        samples.local_queue(), "status.fairSharing.admissionFairSharingStatus.consumedResources.cpu", "1,5"
    )
    (problem,) = load_problems(yaml.safe_dump(doc))
    assert "consumedResources[cpu]: '1,5' is not a quantity" in problem


def test_all_problems_of_all_documents_are_reported_and_nothing_is_returned() -> None:
    good = yaml.safe_dump(samples.resource_flavor())
    bad = yaml.safe_dump(samples.with_(samples.cohort(), "spec.parentName", "Bad"))
    problems = load_problems("---\n".join([good, bad, "- x\n", good]))
    assert [p.split(" ")[0].rstrip(":") for p in problems] == ["f.yaml#2", "f.yaml#3"]


def test_empty_documents_are_skipped_but_counted() -> None:
    text = "---\n---\n" + yaml.safe_dump(samples.with_(samples.cohort(), "spec.parentName", "Bad"))
    (problem,) = load_problems(text)
    assert problem.startswith("f.yaml#2 Cohort/research")


def test_alias_bombs_are_refused() -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]")
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: n, annotations: {}}\nbomb:\n" + "\n".join(
        "  " + line for line in lines
    )
    (problem,) = load_problems(text)
    assert "more than" in problem


def test_deep_nesting_is_refused() -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\nspec: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(InputError):
        manifests.load_text(text, "deep.yaml")


def test_a_10_mb_file_loads_quickly(tmp_path: Path) -> None:
    doc = yaml.safe_dump(samples.workload())
    copies = []
    for i in range(10 * 1024 * 1024 // len(doc) + 1):
        copies.append(doc.replace("name: job-a", f"name: job-{i}"))
    path = tmp_path / "big.yaml"
    path.write_text("---\n".join(copies))
    assert path.stat().st_size >= 10 * 1024 * 1024
    start = time.monotonic()
    objects = manifests.load_paths([path])
    assert len(objects) == len(copies)
    assert time.monotonic() - start < 120


def test_a_10_mb_string_value_is_refused_cleanly(tmp_path: Path) -> None:
    doc = samples.cohort()
    doc["spec"]["parentName"] = "a" * (10 * 1024 * 1024)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ValidationError) as err:
        manifests.load_paths([path])
    (problem,) = err.value.problems
    assert problem.path == "spec.parentName"
    assert len(str(problem)) < 1000


def test_json_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(samples.resource_flavor()))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(yaml.safe_dump(samples.cohort()))
    (tmp_path / "notes.txt").write_text("not a manifest")
    kinds = [obj.kind for obj in manifests.load_paths([tmp_path])]
    assert kinds == ["ResourceFlavor", "Cohort"]


def test_broken_json_names_the_position(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"kind": ')
    with pytest.raises(ValidationError) as err:
        manifests.load_paths([tmp_path / "a.json"])
    assert "line 1, column 10: not valid JSON" in str(err.value)


def test_missing_and_binary_files_are_problems_of_their_own(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(samples.cohort()))
    with pytest.raises(ValidationError) as err:
        manifests.load_paths([tmp_path / "missing.yaml", tmp_path / "bin.yaml", tmp_path / "ok.yaml"])
    messages = [p.message for p in err.value.problems]
    assert messages == ["no such file or directory", "not UTF-8 text (byte 0)"]


def test_kubectl_lists_are_read_item_by_item() -> None:
    items = [samples.resource_flavor(), samples.with_(samples.cohort(), "spec.parentName", "Bad")]
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items[:1]})
    assert [o.kind for o in manifests.load_text(text, "l.yaml")] == ["ResourceFlavor"]
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
    (problem,) = load_problems(text, "l.yaml")
    assert problem.startswith("l.yaml#1 Cohort/research items[1].spec.parentName: 'Bad'")
