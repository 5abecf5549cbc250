"""Assertions shared by the rule tests: a manifest is accepted, or refused at a path."""

from __future__ import annotations

from typing import Any

import pytest

from pykueue.api import manifests
from pykueue.api.manifests import KubeObject
from pykueue.errors import FieldProblem, ValidationError


def problems(doc: dict[str, Any]) -> list[FieldProblem]:
    try:
        manifests.parse_object(doc, "t.yaml#1")
    except ValidationError as err:
        return err.problems
    return []


def accepted(doc: dict[str, Any]) -> KubeObject:
    found = problems(doc)
    assert not found, "\n".join(map(str, found))
    return manifests.parse_object(doc)


def refused(doc: dict[str, Any], path: str, fragment: str) -> FieldProblem:
    """The document is refused with a problem at exactly `path` whose message contains `fragment`."""
    found = problems(doc)
    for problem in found:
        if problem.path == path and fragment in problem.message:
            assert problem.source == "t.yaml#1"
            return problem
    pytest.fail(f"no problem at {path!r} containing {fragment!r}; got:\n" + "\n".join(map(str, found)))
