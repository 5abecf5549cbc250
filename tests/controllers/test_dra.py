"""DRA: devices asked for through ResourceClaimTemplates are charged through deviceClassMappings."""

from __future__ import annotations

import asyncio
from typing import Any

from pykueue.api import manifests
from pykueue.engine import pod_requests
from pykueue.reconcilers import integrations, jobframework
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


def workloads_after(*objs: dict[str, Any], mappings: dict[str, str] = MAPPINGS) -> list[dict[str, Any]]:
    store = MemoryStore()
    reconciler = JobReconciler(
        store, integrations.registry(), dict, settings=jobframework.Settings(device_classes=mappings)
    )

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


def test_an_unmapped_device_class_or_all_mode_gets_no_workload() -> None:
    other = template("other", {"name": "x", "exactly": {"deviceClassName": "fpga.example.com"}})
    assert workloads_after(other, job("other")) == []
    every = template(
        "all", {"name": "x", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}}
    )
    assert workloads_after(every, job("all")) == []


def test_a_missing_template_holds_the_workload_until_it_exists() -> None:
    assert workloads_after(job("later")) == []
    late = template("later", {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}})
    [workload] = workloads_after(late, job("later"))
    assert workload["spec"]["podSets"][0]["template"]["spec"]["overhead"] == {"example.com/gpu": "1"}


def test_pods_without_claims_are_charged_nothing_extra() -> None:
    [workload] = workloads_after(job())
    assert "overhead" not in workload["spec"]["podSets"][0]["template"]["spec"]
