"""Per-pod requests as Kubernetes and Kueue compute them, and upstream's validation words."""

from __future__ import annotations

from typing import Any

from pykueue.api import manifests
from pykueue.api.core import PodSpec
from pykueue.engine import intake, pod_requests, specs

PATH = "spec.podSets[0].template.spec"


def _spec(**fields: Any) -> PodSpec:
    return PodSpec.model_validate(fields)


def _container(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> Any:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}


def test_pod_level_requests_replace_the_sum_only_for_the_resources_they_name() -> None:
    spec = _spec(
        containers=[
            _container("a", {"cpu": "1", "memory": "1Gi"}),
            _container("b", {"cpu": "1", "example.com/x": "1"}),
        ],
        initContainers=[_container("init", {"cpu": "5"})],
        resources={"requests": {"cpu": "3", "hugepages-2Mi": "4Mi", "example.com/x": "9"}},
        overhead={"cpu": "100m"},
    )
    pod = pod_requests.compute(spec, PATH, [])
    # cpu: the pod level (3) replaces max(1+1, init 5); overhead on top. example.com/x is
    # not a pod-level resource: the containers' value stays.
    assert pod.requests["cpu"] == 3100
    # Milli-units throughout (whole units rounded up, except cpu).
    assert pod.requests["memory"] == 1024**3 * 1000
    assert pod.requests["hugepages-2Mi"] == 4 * 1024**2 * 1000
    assert pod.requests["example.com/x"] == 1000
    assert pod.invalid == [] and pod.outside_limit_range == []


def test_without_the_gate_pod_level_resources_are_ignored() -> None:
    spec = _spec(
        containers=[_container("a", {"cpu": "1"})],
        resources={"requests": {"cpu": "3"}, "limits": {"cpu": "2"}},
    )
    pod = pod_requests.compute(spec, PATH, [], pod_level=False)
    assert pod.requests == {"cpu": 1000} and pod.invalid == []


def test_pod_limit_range_defaults_fill_pod_level_resources_and_its_limits_count() -> None:
    limits = [
        specs.LimitRangeItem(
            "Pod", default={"cpu": 4000}, default_request={"memory": 2 * 1024**3 * 1000}, max={"cpu": 2000}
        )
    ]
    spec = _spec(containers=[_container("a", {"cpu": "500m"})], resources={"requests": {"cpu": "1"}})
    pod = pod_requests.compute(spec, PATH, limits)
    assert pod.requests["memory"] == 2 * 1024**3 * 1000, "defaultRequest of the Pod type"
    assert pod.invalid == [], "the default pod-level limit (4) is above the request (1)"
    assert pod.outside_limit_range == []
    over = _spec(containers=[_container("a", {"cpu": "500m"})], resources={"requests": {"cpu": "3"}})
    assert pod_requests.compute(over, PATH, limits).outside_limit_range == [
        f'{PATH}: Invalid value: ["cpu"]: requests must not be above the limitRange max'
    ]


def test_every_problem_is_named_and_several_are_aggregated_as_kubernetes_does() -> None:
    spec = _spec(
        initContainers=[_container("init", {"cpu": "2"}, {"cpu": "1"})],
        containers=[_container("a", {"cpu": "2", "memory": "2Gi"}, {"cpu": "1", "memory": "1Gi"})],
    )
    pod = pod_requests.compute(spec, PATH, [])
    assert pod_requests.problem([pod]) == (
        "resources validation failed: ["
        f'{PATH}.initContainers[0]: Invalid value: ["cpu"]: requests must not exceed its limits, '
        f'{PATH}.containers[0]: Invalid value: ["cpu","memory"]: requests must not exceed its limits]'
    )


def test_container_minimum_checks_only_the_resources_the_container_names() -> None:
    limits = [specs.LimitRangeItem("Container", min={"cpu": 1000, "memory": 1024**3 * 1000})]
    pod = pod_requests.compute(_spec(containers=[_container("a", {"cpu": "500m"})]), PATH, limits)
    assert pod.outside_limit_range == [
        f'{PATH}.containers[0]: Invalid value: ["cpu"]: requests must not be below the limitRange min'
    ]


def _bound_pod(labels: dict[str, str]) -> Any:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": labels},
        "spec": {
            "nodeName": "x1",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}],
        },
        "status": {"phase": "Running"},
    }
    return manifests.parse_object(manifest, source="Pod/ns/p")


def test_a_bound_pod_takes_its_requests_and_a_slot_unless_its_workload_counts_it() -> None:
    assert intake.pod_usage(_bound_pod({})) == ("x1", {"cpu": 2000, "pods": 1000})
    # A TAS workload's pod: its assignment already counts it on the node.
    assert intake.pod_usage(_bound_pod({intake.TAS_POD_LABEL: "true"})) is None


def _sidecar(name: str, requests: dict[str, str]) -> Any:
    return {**_container(name, requests), "restartPolicy": "Always"}


def test_sidecars_add_to_the_containers_and_run_beside_later_init_containers() -> None:
    # kube-scheduler's sum (upstream's resourcehelpers.PodRequests, KEP 753):
    #   containers 1 + sidecars 1 + 2 = 4 cpu, while the init phase needs at most
    #   "setup" 2 (before any sidecar), then "migrate" 4 beside sidecar "log" 1 = 5,
    #   then the sidecars 1 + 2 = 3: the pod needs max(4, 5) = 5 cpu.
    spec = _spec(
        containers=[_container("main", {"cpu": "1"})],
        initContainers=[
            _container("setup", {"cpu": "2"}),
            _sidecar("log", {"cpu": "1", "memory": "1Gi"}),
            _container("migrate", {"cpu": "4"}),
            _sidecar("proxy", {"cpu": "2"}),
        ],
    )
    pod = pod_requests.compute(spec, PATH, [])
    assert pod.requests["cpu"] == 5000
    # The sidecar's memory runs for the pod's whole life: it counts although no container asks.
    assert pod.requests["memory"] == 1024**3 * 1000


def test_a_sidecar_alone_counts_beside_the_containers_not_as_an_init_container() -> None:
    spec = _spec(
        containers=[_container("main", {"cpu": "3"})],
        initContainers=[_sidecar("log", {"cpu": "1"})],
    )
    # As an ordinary init container it would be max(3, 1) = 3.
    assert pod_requests.compute(spec, PATH, []).requests["cpu"] == 4000
