"""Semantic equality: quantities by value, missing and empty alike, everything else as written."""

from __future__ import annotations

import pytest

from pykueue.api import semantic


def _pod(cpu: object, **extra: object) -> dict[str, object]:
    return {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}],
        **extra,
    }


@pytest.mark.parametrize("spelled", [1, "1", "1000m", 1.0, "1e0", "0.001k"])
def test_a_quantity_is_its_value(spelled: object) -> None:
    assert semantic.equal(_pod(spelled), _pod("1"))
    assert semantic.same_resources({"cpu": spelled}, {"cpu": "1"})


def test_other_values_differ() -> None:
    assert not semantic.equal(_pod(2), _pod("1"))
    assert not semantic.same_resources({"cpu": "1"}, {"cpu": "1", "memory": "1Gi"})
    assert not semantic.equal(_pod(1, nodeName="a"), _pod(1, nodeName="b"))


def test_only_quantities_are_read_as_numbers() -> None:
    # a container named "1" is not the container named "1000m"
    assert not semantic.equal({"containers": [{"name": "1"}]}, {"containers": [{"name": "1000m"}]})
    assert not semantic.equal({"name": 1}, {"name": "1"})


def test_missing_null_and_empty_are_alike() -> None:
    assert semantic.equal(_pod(1, tolerations=[], nodeSelector=None), _pod(1))
    assert semantic.same_resources(None, {})


def test_a_bad_quantity_is_compared_as_written() -> None:
    assert semantic.same_resources({"cpu": "lots"}, {"cpu": "lots"})
    assert not semantic.same_resources({"cpu": "lots"}, {"cpu": "1"})


def test_canonical_resources_for_hashing() -> None:
    assert semantic.canonical_resources({"cpu": 1.5, "memory": "1024Mi", "odd": "lots"}) == {
        "cpu": "1500m",
        "memory": "1Gi",
        "odd": "lots",
    }
