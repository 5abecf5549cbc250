"""DRA: devices asked for through ResourceClaimTemplates are charged through deviceClassMappings;
what cannot be charged so makes the Workload Misconfigured, naming the field."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pykueue.api import manifests
from pykueue.api.configuration import DeviceClassMapping
from pykueue.engine import intake, pod_requests
from pykueue.engine.intake import DEVICE_PROBLEM_ANNOTATION
from pykueue.reconcilers import dra, integrations, jobframework
from pykueue.reconcilers.job_reconciler import JobReconciler
from pykueue.store.memory import MemoryStore

MAPPINGS = {"gpu.example.com": "example.com/gpu"}


def template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def job(*claims: str, parallelism: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "dra", "namespace": "default", "labels": {jobframework.QUEUE_NAME_LABEL: "q"}},
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {"requests": {"cpu": "1"}, "claims": [{"name": c} for c in claims]},
                        }
                    ],
                    "resourceClaims": [{"name": c, "resourceClaimTemplateName": c} for c in claims],
                }
            },
        },
    }


def _reconciler(
    store: MemoryStore, mappings: dict[str, str], sources: dict[str, str] | None = None
) -> JobReconciler:
    settings = jobframework.Settings(device_classes=mappings, device_class_sources=sources or {})
    return JobReconciler(store, integrations.registry(), dict, settings=settings)


def workloads_after(
    *objs: dict[str, Any], mappings: dict[str, str] = MAPPINGS, sources: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    store = MemoryStore()
    reconciler = _reconciler(store, mappings, sources)

    async def run() -> list[dict[str, Any]]:
        for obj in objs:
            await store.create(obj)
        await reconciler.sync()
        await reconciler.reconcile()
        return (await store.list("Workload"))[0]

    return asyncio.run(run())


def test_each_pod_is_charged_the_mapped_resource_times_count() -> None:
    gpus = template(
        "two-gpus", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}
    )
    single = template("one-gpu", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}})
    [workload] = workloads_after(gpus, single, job("two-gpus", "one-gpu", parallelism=3))
    pod_set = workload["spec"]["podSets"][0]
    assert pod_set["template"]["spec"]["overhead"] == {"example.com/gpu": "3"}
    assert pod_set["count"] == 3
    # The engine reads it as the pod's request, beside the containers' own.
    parsed = manifests.parse_object(workload)
    pod = pod_requests.compute(parsed.spec.pod_sets[0].template.spec, "spec", [])  # type: ignore[union-attr]
    assert pod.invalid == [] and pod.outside_limit_range == []
    assert pod.requests["example.com/gpu"] == 3000 and pod.requests["cpu"] == 1000  # milli-units


def _problem(workload: dict[str, Any]) -> str:
    return str(workload["metadata"].get("annotations", {}).get(DEVICE_PROBLEM_ANNOTATION, ""))


def test_an_unmapped_device_class_gets_a_misconfigured_workload_naming_the_field() -> None:
    other = template("other", {"name": "x", "exactly": {"deviceClassName": "fpga.example.com"}})
    [workload] = workloads_after(other, job("other"))
    # As upstream: queued all the same, uncharged, with the message of its workload controller.
    assert "overhead" not in workload["spec"]["podSets"][0]["template"]["spec"]
    assert _problem(workload) == (
        "spec.podSets[0].template.spec.resourceClaims[0]: ResourceClaimTemplate other: "
        "spec.devices.requests[0].exactly.deviceClassName: DeviceClass fpga.example.com is not mapped "
        "in DRA configuration (resources.deviceClassMappings)"
    )
    # The engine reads it as a reason the Workload cannot be admitted.
    assert intake.workload(manifests.parse_object(workload), {}, []).invalid_reason == _problem(workload)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        (
            {"exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}},
            "exactly.allocationMode",
        ),
        ({"exactly": {"deviceClassName": "gpu.example.com", "adminAccess": True}}, "exactly.adminAccess"),
        ({"firstAvailable": [{"name": "a", "deviceClassName": "gpu.example.com"}]}, "firstAvailable"),
        (
            {
                "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "capacity": {"requests": {"gpu.example.com/memory": "4Gi"}},
                }
            },
            "exactly.capacity.requests",
        ),
    ],
)
def test_an_unsupported_request_field_is_named(request_fields: dict[str, Any], field: str) -> None:
    odd = template("odd", {"name": "x", **request_fields})
    [workload] = workloads_after(odd, job("odd"))
    assert _problem(workload).startswith(
        f"spec.podSets[0].template.spec.resourceClaims[0]: ResourceClaimTemplate odd: spec.devices.requests[0].{field}:"
    )
    assert "overhead" not in workload["spec"]["podSets"][0]["template"]["spec"]


def test_a_claim_named_directly_is_refused() -> None:
    shared = job()
    shared["spec"]["template"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimName": "shared-gpu"}
    ]
    [workload] = workloads_after(shared)
    assert _problem(workload).startswith(
        "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimName: a ResourceClaim named directly"
    )


def _mapping(**fields: Any) -> DeviceClassMapping:
    return DeviceClassMapping.model_validate(fields)


def test_a_counter_or_capacity_source_is_refused_naming_the_configuration_field() -> None:
    mappings = [
        _mapping(name="example.com/gpu", deviceClassNames=["plain.example.com"]),
        _mapping(
            name="gpu.memory",
            deviceClassNames=["gpu.example.com"],
            sources=[{"counter": {"name": "memory", "driver": "gpu.example.com"}}],
        ),
        _mapping(
            name="shared.memory",
            deviceClassNames=["shared.example.com"],
            sources=[{"capacity": {"name": "shared.example.com/memory", "driver": "shared.example.com"}}],
        ),
    ]
    classes, sources = dra.device_classes(mappings), dra.unsupported_sources(mappings)
    assert classes == {
        "plain.example.com": "example.com/gpu",
        "gpu.example.com": "gpu.memory",
        "shared.example.com": "shared.memory",
    }
    assert sources == {
        "gpu.example.com": "resources.deviceClassMappings[1].sources[0].counter "
        "(counter-based quota (partitionable devices))",
        "shared.example.com": "resources.deviceClassMappings[2].sources[0].capacity "
        "(capacity-based quota (consumable capacity))",
    }
    one = template("one", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}})
    [workload] = workloads_after(one, job("one"), mappings=classes, sources=sources)
    assert _problem(workload).endswith(
        "exactly.deviceClassName: DeviceClass gpu.example.com is mapped with "
        "resources.deviceClassMappings[1].sources[0].counter (counter-based quota (partitionable devices)), "
        "which pykueue does not support"
    )
    # Never charged as a device count of the counter's quota resource.
    assert "overhead" not in workload["spec"]["podSets"][0]["template"]["spec"]
    plain = template("plain", {"name": "gpu", "exactly": {"deviceClassName": "plain.example.com"}})
    [charged] = workloads_after(plain, job("plain"), mappings=classes, sources=sources)
    assert _problem(charged) == "" and charged["spec"]["podSets"][0]["template"]["spec"]["overhead"] == {
        "example.com/gpu": "1"
    }


def test_a_misconfigured_workload_is_built_anew_once_the_mapping_exists() -> None:
    other = template("other", {"name": "x", "exactly": {"deviceClassName": "fpga.example.com", "count": 2}})

    async def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        store = MemoryStore()
        await store.create(other)
        await store.create(job("other"))
        first = _reconciler(store, MAPPINGS)
        await first.sync()
        await first.reconcile()
        before = (await store.list("Workload"))[0]
        # The controller restarts with the class mapped: the Workload is deleted, then made
        # anew (on the next pass, after the watch told of the deletion), charged.
        mapped = {**MAPPINGS, "fpga.example.com": "example.com/fpga"}
        for _ in range(2):
            restarted = _reconciler(store, mapped)
            await restarted.sync()
            await restarted.reconcile()
        return before, (await store.list("Workload"))[0]

    before, after = asyncio.run(run())
    assert [_problem(w) != "" for w in before] == [True]
    [workload] = after
    assert _problem(workload) == ""
    assert workload["spec"]["podSets"][0]["template"]["spec"]["overhead"] == {"example.com/fpga": "2"}


def test_an_unchanged_problem_keeps_its_workload() -> None:
    other = template("other", {"name": "x", "exactly": {"deviceClassName": "fpga.example.com"}})

    async def run() -> tuple[str, str, int]:
        store = MemoryStore()
        await store.create(other)
        await store.create(job("other"))
        reconciler = _reconciler(store, MAPPINGS)
        await reconciler.sync()
        await reconciler.reconcile()
        [made] = (await store.list("Workload"))[0]
        reconciler.dirty.update(reconciler.jobs)
        writes = await reconciler.reconcile()
        [kept] = (await store.list("Workload"))[0]
        return made["metadata"]["uid"], kept["metadata"]["uid"], writes

    made, kept, writes = asyncio.run(run())
    assert made == kept and writes == 0


def test_a_missing_template_holds_the_workload_until_it_exists() -> None:
    assert workloads_after(job("later")) == []
    late = template("later", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}})
    [workload] = workloads_after(late, job("later"))
    assert workload["spec"]["podSets"][0]["template"]["spec"]["overhead"] == {"example.com/gpu": "1"}


def test_pods_without_claims_are_charged_nothing_extra() -> None:
    [workload] = workloads_after(job())
    assert "overhead" not in workload["spec"]["podSets"][0]["template"]["spec"]
