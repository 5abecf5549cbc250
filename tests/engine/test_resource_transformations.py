"""Upstream Configuration's ``resources`` block: what of a pod's requests counts as quota."""

from __future__ import annotations

import pytest

from pykueue.api import configuration as api_configuration
from pykueue.engine import configuration
from pykueue.engine.config import Resources, ResourceTransformation
from pykueue.errors import InputError


def test_no_settings_leave_requests_as_they_are() -> None:
    requests = {"cpu": 1000}
    assert Resources().quota_requests(requests) is requests


def test_retain_keeps_the_input_and_adds_outputs() -> None:
    rules = Resources(transformations=(ResourceTransformation("cpu", True, (("credits", 2000),)),))
    assert rules.quota_requests({"cpu": 1500, "memory": 10}) == {"cpu": 1500, "credits": 3000, "memory": 10}


def test_replace_drops_the_input() -> None:
    rules = Resources(transformations=(ResourceTransformation("gpu", False, (("units", 500),)),))
    assert rules.quota_requests({"gpu": 3000}) == {"units": 1500}


def test_outputs_of_several_inputs_add_up_and_a_negative_total_counts_as_zero() -> None:
    rules = Resources(
        transformations=(
            ResourceTransformation("a", False, (("x", 1000), ("y", -1000))),
            ResourceTransformation("b", False, (("x", 1000),)),
        )
    )
    # y: -2 made by the transformations, floored; it does not reduce anything else.
    assert rules.quota_requests({"a": 2000, "b": 1000, "y": 5000}) == {"x": 3000, "y": 5000}


def test_multiply_by_scales_the_outputs_not_the_retained_input() -> None:
    rules = Resources(transformations=(ResourceTransformation("cpu", True, (("cpu-hours", 1000),), "hours"),))
    assert rules.quota_requests({"cpu": 2000, "hours": 3000}) == {
        "cpu": 2000,
        "hours": 3000,
        "cpu-hours": 6000,
    }


def test_sub_milli_products_round_up() -> None:
    rules = Resources(transformations=(ResourceTransformation("cpu", False, (("c", 1),)),))
    assert rules.quota_requests({"cpu": 1}) == {"c": 1}


def test_excluded_prefixes_are_dropped_before_transformations() -> None:
    rules = Resources(
        exclude_prefixes=("example.com/",),
        transformations=(ResourceTransformation("example.com/gpu", False, (("units", 1000),)),),
    )
    assert rules.quota_requests({"cpu": 1000, "example.com/gpu": 1000}) == {"cpu": 1000}


def _read(raw: object) -> Resources:
    """``resources`` as a scenario's ``config`` holds it, through the one Configuration reader."""
    cfg = api_configuration.parse_sections({"resources": raw}, prefix="config")
    return configuration.resources(cfg.resources)


def test_the_section_is_read_with_upstream_defaults() -> None:
    found = _read({"transformations": [{"input": "cpu", "outputs": {"credits": "500m"}}]})
    assert found.transformations == (ResourceTransformation("cpu", True, (("credits", 500),)),)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"transformations": [{"input": "cpu"}, {"input": "cpu"}]}, "transformations[1].input"),
        ({"transformations": [{"input": "cpu", "outputs": {"x": "lots"}}]}, "transformations[0].outputs.x"),
        ({"transformations": [{"strategy": "Retain"}]}, "transformations[0].input"),
        ({"excludeResourcePrefixes": "example.com/"}, "excludeResourcePrefixes"),
    ],
)
def test_bad_sections_name_the_field(raw: object, where: str) -> None:
    with pytest.raises(InputError) as info:
        _read(raw)
    assert str(info.value).startswith(f"config.resources.{where}: "), str(info.value)
