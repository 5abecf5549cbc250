"""The small helpers the engine reads models through: selectors, tolerations, requests, conditions."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pykueue.api import manifests
from pykueue.api.core import PodSpec, Taint, Toleration, pod_requests
from pykueue.api.meta import ZERO_TIME, LabelSelector, format_time
from pykueue.api.workload import Workload

from . import samples


def selector(**spec: Any) -> LabelSelector:
    return LabelSelector.model_validate(spec)


def test_label_selector_matching() -> None:
    assert selector().matches({})
    assert selector(matchLabels={"team": "a"}).matches({"team": "a", "x": "y"})
    assert not selector(matchLabels={"team": "a"}).matches({"team": "b"})
    expr = {"key": "team", "operator": "In", "values": ["a", "b"]}
    assert selector(matchExpressions=[expr]).matches({"team": "b"})
    assert not selector(matchExpressions=[expr]).matches({})
    assert selector(matchExpressions=[dict(expr, operator="NotIn")]).matches({})
    assert selector(matchExpressions=[{"key": "team", "operator": "Exists"}]).matches({"team": ""})
    assert not selector(matchExpressions=[{"key": "team", "operator": "DoesNotExist"}]).matches({"team": ""})


def test_toleration_matching() -> None:
    taint = Taint(key="spot", value="true", effect="NoSchedule")
    assert Toleration(key="spot", value="true").tolerates(taint)
    assert Toleration(key="spot", operator="Exists", effect="NoSchedule").tolerates(taint)
    assert Toleration(operator="Exists").tolerates(taint)
    assert not Toleration(key="spot", value="false").tolerates(taint)
    assert not Toleration(key="spot", operator="Exists", effect="NoExecute").tolerates(taint)


def test_pod_requests_sum_containers_take_max_init_and_add_overhead() -> None:
    spec = PodSpec.model_validate(
        {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "100m"},
        }
    )
    assert pod_requests(spec) == {"cpu": "2100m", "memory": "2Gi"}


def test_workload_condition_helpers() -> None:
    wl = manifests.parse_object(samples.workload())
    assert isinstance(wl, Workload)
    assert wl.has_quota_reservation()
    assert not wl.is_admitted()
    assert not wl.is_finished()
    assert wl.pod_set("main") is not None
    assert wl.pod_set("other") is None


def test_zero_time_round_trips() -> None:
    assert format_time(ZERO_TIME) == "0001-01-01T00:00:00Z"
    doc = samples.with_(samples.workload(), "metadata.creationTimestamp", "0001-01-01T00:00:00Z")
    assert manifests.parse_object(doc).metadata.creation_timestamp == ZERO_TIME


names = st.from_regex(r"\A[a-z][a-z0-9-]{0,10}[a-z0-9]\Z")
quantities = st.integers(min_value=0, max_value=10**12).map(lambda m: f"{m}m")


@st.composite
def cluster_queues(draw: st.DrawFn) -> dict[str, Any]:
    resources = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    flavors = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    group = {
        "coveredResources": resources,
        "flavors": [
            {"name": f, "resources": [{"name": r, "nominalQuota": draw(quantities)} for r in resources]}
            for f in flavors
        ],
    }
    return {
        "apiVersion": samples.V2,
        "kind": "ClusterQueue",
        "metadata": {"name": draw(names)},
        "spec": {
            "resourceGroups": [group],
            "queueingStrategy": draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"])),
        },
    }


@settings(max_examples=50, deadline=None)
@given(cluster_queues())
def test_generated_cluster_queues_round_trip(doc: dict[str, Any]) -> None:
    obj = manifests.parse_object(doc)
    out = manifests.to_manifest(obj)
    assert manifests.parse_object(out) == obj
    assert out["spec"]["resourceGroups"] == doc["spec"]["resourceGroups"]
