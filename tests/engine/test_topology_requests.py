"""Pod set topology requests: upstream's annotation rules, and bad annotations named."""

from __future__ import annotations

import pytest

from pykueue.api.workload import PodSet as ApiPodSet
from pykueue.engine import topology_requests as tr
from pykueue.engine.topology_requests import SliceLayer, TopologyRequest


def test_required_wins_over_preferred_and_unconstrained() -> None:
    request = tr.from_annotations({tr.REQUIRED: "rack", tr.PREFERRED: "block", tr.UNCONSTRAINED: "true"})
    assert request == TopologyRequest(required="rack")


def test_slices_need_both_the_level_and_the_size() -> None:
    assert tr.from_annotations({tr.SLICE_REQUIRED: "host"}) is None
    request = tr.from_annotations({tr.SLICE_REQUIRED: "host", tr.SLICE_SIZE: "4"})
    assert request is not None and request.slice_only() and request.is_unconstrained()
    assert request.slices == (SliceLayer("host", 4),)


def test_a_group_name_counts_only_with_required_or_preferred() -> None:
    assert tr.from_annotations({tr.UNCONSTRAINED: "true", tr.GROUP_NAME: "g"}) == TopologyRequest(
        unconstrained=True
    )
    assert tr.from_annotations({tr.PREFERRED: "rack", tr.GROUP_NAME: "g"}) == TopologyRequest(
        preferred="rack", group="g"
    )


def test_unconstrained_false_still_asks_for_tas_explicitly() -> None:
    request = tr.from_annotations({tr.UNCONSTRAINED: "false"})
    assert request is not None and request.explicit() and not request.is_unconstrained()


def test_multi_layer_constraints_replace_the_two_level_slice_annotations() -> None:
    annotations = {
        tr.REQUIRED: "block",
        tr.SLICE_REQUIRED: "host",
        tr.SLICE_SIZE: "8",
        tr.SLICE_CONSTRAINTS: '[{"topology": "rack", "size": 4}, {"topology": "host", "size": 2}]',
    }
    request = tr.from_annotations(annotations)
    assert request is not None and request.slices == (SliceLayer("rack", 4), SliceLayer("host", 2))
    without_gate = tr.from_annotations(annotations, multi_layer=False)
    assert without_gate is not None and without_gate.slices == (SliceLayer("host", 8),)


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({tr.UNCONSTRAINED: "yes"}, tr.UNCONSTRAINED),
        ({tr.SLICE_REQUIRED: "host", tr.SLICE_SIZE: "two"}, tr.SLICE_SIZE),
        ({tr.SLICE_CONSTRAINTS: "[]"}, tr.SLICE_CONSTRAINTS),
        ({tr.SLICE_CONSTRAINTS: '[{"topology": "rack", "size": 0}]'}, tr.SLICE_CONSTRAINTS),
        ({tr.SLICE_CONSTRAINTS: "{"}, tr.SLICE_CONSTRAINTS),
    ],
)
def test_a_bad_annotation_is_named(annotations: dict[str, str], named: str) -> None:
    with pytest.raises(tr.TopologyRequestError, match=named):
        tr.from_annotations(annotations)


def test_the_field_wins_over_the_annotations() -> None:
    ps = ApiPodSet.model_validate(
        {
            "name": "main",
            "count": 2,
            "topologyRequest": {
                "preferred": "rack",
                "podSetSliceRequiredTopology": "host",
                "podSetSliceSize": 2,
            },
            "template": {"metadata": {"annotations": {tr.REQUIRED: "block"}}},
        }
    )
    assert tr.from_pod_set(ps) == TopologyRequest(preferred="rack", slices=(SliceLayer("host", 2),))
