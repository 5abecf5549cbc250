"""pykueue's generated CRDs in a real API server: they install, validate and default like upstream's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from pykueue.api import crd, manifests

from .controlplane import ApiError, KubeCluster
from .crd_helpers import CRD_PATH, QUICKSTART_QUEUES, install_crds

pytestmark = pytest.mark.kube

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def crds_installed(kube_apiserver: KubeCluster) -> KubeCluster:
    install_crds(kube_apiserver)
    return kube_apiserver


def _unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@pytest.fixture
def cleanup(crds_installed: KubeCluster) -> Iterator[list[str]]:
    paths: list[str] = []
    yield paths
    for path in reversed(paths):
        crds_installed.delete(path)


def _create(cluster: KubeCluster, cleanup: list[str], path: str, body: dict[str, Any]) -> dict[str, Any]:
    created = dict(cluster.create(f"{path}?fieldValidation=Strict", body))
    cleanup.append(f"{path}/{created['metadata']['name']}")
    return created


def _cq(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _group(*flavors: dict[str, Any], covered: tuple[str, ...] = ("cpu",)) -> dict[str, Any]:
    return {"coveredResources": list(covered), "flavors": list(flavors)}


def _flavor(name: str, **quotas: Any) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": res, **quota} for res, quota in quotas.items()]}


# --- installing ---------------------------------------------------------------------------


def test_every_kind_is_established_with_upstream_names_and_scope(crds_installed: KubeCluster) -> None:
    discovery = crds_installed.get(KUEUE)["resources"]
    by_kind = {r["kind"]: r for r in discovery if "/" not in r["name"]}
    assert set(by_kind) == {
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Cohort",
        "WorkloadPriorityClass",
        "AdmissionCheck",
        "ProvisioningRequestConfig",
        "MultiKueueConfig",
        "MultiKueueCluster",
        "Topology",
        "Workload",
    }
    namespaced = {kind for kind, r in by_kind.items() if r["namespaced"]}
    assert namespaced == {"LocalQueue", "Workload"}
    assert by_kind["ClusterQueue"]["shortNames"] == ["cq"]
    assert set(by_kind["LocalQueue"]["shortNames"]) == {"queue", "queues", "lq"}
    status = {r["name"].split("/")[0] for r in discovery if r["name"].endswith("/status")}
    assert {"clusterqueues", "localqueues", "workloads", "cohorts", "admissionchecks"} <= status
    # v1beta1 is served too, stored as v1beta2.
    assert crds_installed.get("/apis/kueue.x-k8s.io")["preferredVersion"]["version"] == "v1beta2"
    stored = crds_installed.get(f"{CRD_PATH}/clusterqueues.kueue.x-k8s.io")["status"]["storedVersions"]
    assert stored == ["v1beta2"]


# --- upstream's quickstart ----------------------------------------------------------------


def test_upstream_quickstart_applies_unchanged(crds_installed: KubeCluster, kube_namespace: str) -> None:
    text = QUICKSTART_QUEUES.replace('namespace: "default"', f'namespace: "{kube_namespace}"')
    text = text.replace("default-flavor", "qs-flavor").replace('"cluster-queue"', '"qs-queue"')
    try:
        out = crds_installed.kubectl("apply", "--server-side", "-f", "-", input=text)
        assert "clusterqueue.kueue.x-k8s.io/qs-queue serverside-applied" in out
        cq = crds_installed.get(f"{KUEUE}/clusterqueues/qs-queue")
        # Defaults from the schema, as upstream's CRD applies them.
        assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
        assert cq["spec"]["preemption"] == {
            "reclaimWithinCohort": "Never",
            "withinClusterQueue": "Never",
            "borrowWithinCohort": {"policy": "Never"},
        }
        assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 9
        table = crds_installed.kubectl("get", "cq", "qs-queue", "-o", "wide")
        header = table.splitlines()[0].split()
        assert header[:3] == ["NAME", "COHORT", "STRATEGY"]
        assert "PENDING" in header and "ADMITTED" in header
        lq = crds_installed.kubectl("get", "lq", "-n", kube_namespace)
        assert lq.splitlines()[0].split()[:2] == ["NAME", "CLUSTERQUEUE"]
        assert "qs-queue" in lq.splitlines()[1]
    finally:
        crds_installed.kubectl("delete", "--ignore-not-found", "-f", "-", input=text)


# --- the API server refuses what upstream's CRD refuses -------------------------------------

_QUOTA = "spec.resourceGroups[0].flavors[0].resources[0]"

INVALID = {
    "negative quota": (
        {"resourceGroups": [_group(_flavor("f", cpu={"nominalQuota": "-1"}))]},
        [f"{_QUOTA}.nominalQuota", "-1"],
    ),
    "negative quota as a number": (
        {"resourceGroups": [_group(_flavor("f", cpu={"nominalQuota": -3}))]},
        [f"{_QUOTA}.nominalQuota", "greater than or equal to 0"],
    ),
    "not a quantity": (
        {"resourceGroups": [_group(_flavor("f", cpu={"nominalQuota": "lots"}))]},
        [f"{_QUOTA}.nominalQuota", "lots"],
    ),
    "unknown field": ({"cohort": "old-name"}, ['unknown field "spec.cohort"']),
    "bad enum": ({"queueingStrategy": "Fastest"}, ["spec.queueingStrategy", "Unsupported value", "Fastest"]),
    "borrowing limit without cohort": (
        {"resourceGroups": [_group(_flavor("f", cpu={"nominalQuota": "1", "borrowingLimit": "1"}))]},
        ["spec", "borrowingLimit must be nil when cohort is empty"],
    ),
    "flavor without every covered resource": (
        {"resourceGroups": [_group(_flavor("f", cpu={"nominalQuota": "1"}), covered=("cpu", "memory"))]},
        ["spec.resourceGroups[0]", "as many resources as coveredResources"],
    ),
    "flavor listed twice": (
        {"resourceGroups": [_group(_flavor("f", cpu={}), _flavor("f", cpu={}))]},
        ["spec.resourceGroups[0].flavors[1]", "Duplicate value"],
    ),
    "too many resource groups": (
        {
            "resourceGroups": [
                _group(_flavor(f"f{i}", **{f"r{i}": {}}), covered=(f"r{i}",)) for i in range(17)
            ]
        },
        ["spec.resourceGroups", "must have at most 16 items"],
    ),
    "borrowWithinCohort without reclaim": (
        {"cohortName": "c", "preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}},
        ["spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"],
    ),
}


@pytest.mark.parametrize("spec, expected", INVALID.values(), ids=INVALID.keys())
def test_invalid_cluster_queue_is_refused_with_the_field_path(
    crds_installed: KubeCluster, cleanup: list[str], spec: dict[str, Any], expected: list[str]
) -> None:
    with pytest.raises(ApiError) as err:
        _create(crds_installed, cleanup, f"{KUEUE}/clusterqueues", _cq(_unique("bad"), **spec))
    assert err.value.status in (400, 422)
    message = err.value.body["message"]
    for fragment in expected:
        assert fragment in message


def test_cel_rules_guard_updates(
    crds_installed: KubeCluster, cleanup: list[str], kube_namespace: str
) -> None:
    path = f"{KUEUE}/namespaces/{kube_namespace}/localqueues"
    lq = _create(
        crds_installed,
        cleanup,
        path,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q"},
            "spec": {"clusterQueue": "a"},
        },
    )
    lq["spec"]["clusterQueue"] = "b"
    with pytest.raises(ApiError) as err:
        crds_installed.request("PUT", f"{path}/q", lq)
    assert "spec.clusterQueue" in err.value.body["message"]
    assert "immutable" in err.value.body["message"]

    topo = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": _unique("topo")},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]},
    }
    with pytest.raises(ApiError) as err:
        _create(crds_installed, cleanup, f"{KUEUE}/topologies", topo)
    assert "lowest level" in err.value.body["message"]


# --- round trips: the API server's defaults are our models' defaults -------------------------

ROUND_TRIP = [
    _cq("rt-cq", resourceGroups=[_group(_flavor("f", cpu={"nominalQuota": "4"}))]),
    _cq(
        "rt-cq-cohort",
        cohortName="team",
        fairSharing={},
        flavorFungibility={"whenCanBorrow": "TryNextFlavor"},
        resourceGroups=[
            _group(
                _flavor("f", cpu={"nominalQuota": "4", "borrowingLimit": "2", "lendingLimit": "1"}),
                _flavor("g", cpu={}),
            )
        ],
    ),
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "rt-rf"},
        "spec": {},
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "rt-co"},
        "spec": {"parentName": "root"},
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "rt-wpc"},
        "value": 100,
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "rt-prc"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io"},
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": "rt-mkc"},
        "spec": {"clusterSource": {"kubeConfig": {"location": "worker1"}}},
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "rt-topo"},
        "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "rt-lq"},
        "spec": {"clusterQueue": "rt-cq", "fairSharing": {}},
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "rt-wl"},
        "spec": {
            "queueName": "rt-lq",
            "podSets": [
                {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        }
                    },
                    "minCount": 1,
                }
            ],
        },
    },
]


def _payload(doc: dict[str, Any]) -> dict[str, Any]:
    # Our models leave out an empty spec (omitempty); the API server keeps ``spec: {}``.
    return {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata", "status") and v != {}}


@pytest.mark.parametrize("doc", ROUND_TRIP, ids=[d["kind"] + "/" + d["metadata"]["name"] for d in ROUND_TRIP])
def test_round_trip_through_the_api_server_matches_our_models(
    crds_installed: KubeCluster, cleanup: list[str], kube_namespace: str, doc: dict[str, Any]
) -> None:
    kind = next(k for k in crd.KINDS if k.name == doc["kind"])
    base = (
        f"{KUEUE}/namespaces/{kube_namespace}/{kind.plural}" if kind.namespaced else f"{KUEUE}/{kind.plural}"
    )
    stored = _create(crds_installed, cleanup, base, doc)
    ours = manifests.to_manifest(manifests.parse_object(doc))
    # What the API server wrote (its defaults) is exactly what our models fill in...
    assert _payload(stored) == _payload(ours)
    # ... and reads back through our models unchanged.
    again = manifests.to_manifest(
        manifests.parse_object(crds_installed.get(f"{base}/{doc['metadata']['name']}"))
    )
    assert _payload(again) == _payload(ours)


def test_quantities_are_integers_or_strings_as_upstream(
    crds_installed: KubeCluster, cleanup: list[str]
) -> None:
    flavor = _flavor(
        "f", cpu={"nominalQuota": 2}, memory={"nominalQuota": "36Gi"}, gpu={"nominalQuota": "1.5"}
    )
    stored = _create(
        crds_installed,
        cleanup,
        f"{KUEUE}/clusterqueues",
        _cq(_unique("q"), resourceGroups=[_group(flavor, covered=("cpu", "memory", "gpu"))]),
    )
    resources = stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert [r["nominalQuota"] for r in resources] == [2, "36Gi", "1.5"]
    model = manifests.parse_object(stored)
    assert isinstance(model, manifests.ClusterQueue)
    quotas = model.spec.resource_groups[0].flavors[0].resources
    assert [q.nominal_milli for q in quotas] == [2000, 36 * 2**30 * 1000, 1500]
    # A fractional number (YAML `1.5` unquoted) is refused, as by upstream's CRD.
    with pytest.raises(ApiError) as err:
        _create(
            crds_installed,
            cleanup,
            f"{KUEUE}/clusterqueues",
            _cq(_unique("q"), resourceGroups=[_group(_flavor("f", cpu={"nominalQuota": 1.5}))]),
        )
    assert f"{_QUOTA}.nominalQuota" in err.value.body["message"]


def test_crds_render_as_yaml_kubectl_accepts(crds_installed: KubeCluster) -> None:
    text = yaml.safe_dump_all(crd.crds(), sort_keys=False)
    out = crds_installed.kubectl(
        "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", "-", input=text
    )
    assert out.count("customresourcedefinition.apiextensions.k8s.io/") == len(crd.KINDS)


def test_kubectl_explain_describes_the_kinds_and_their_fields(crds_installed: KubeCluster) -> None:
    def explain(path: str) -> str:
        return " ".join(crds_installed.kubectl("explain", path).split())

    assert "A pool of quota per resource flavor" in explain("clusterqueues")
    quota = explain("clusterqueues.spec.resourceGroups.flavors.resources.borrowingLimit")
    assert "How much more than its nominal quota this ClusterQueue may borrow" in quota
    assert "feeds one ClusterQueue" in explain("localqueues")
    assert "The LocalQueue of the workload's namespace" in explain("workloads.spec.queueName")
    assert "spot or on-demand" in explain("resourceflavors")
