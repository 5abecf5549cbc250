"""Unknown fields inside pod templates and Job/JobSet specs: refused where objects are submitted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pykueue.api import manifests
from pykueue.errors import ValidationError

POD: dict[str, Any] = {
    "restartPolicy": "Never",
    "containers": [
        {
            "name": "main",
            "image": "busybox",
            "command": ["sh", "-c", "true"],
            "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5},
            "securityContext": {"capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True},
            "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
        }
    ],
    "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "cfg", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
        {"name": "legacy", "gcePersistentDisk": {"pdName": "disk", "anything": "goes"}},
    ],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
            ]
        }
    },
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ],
    "nodeSelector": {"any-key": "any-value"},
}


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {
            "backoffLimit": 1,
            "podFailurePolicy": {"rules": []},
            "template": {"spec": copy.deepcopy(POD)},
            **spec,
        },
    }


def _unknown(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as err:
        manifests.parse_object(doc, options=manifests.SUBMITTED)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


def test_a_full_pod_template_is_accepted() -> None:
    manifests.parse_object(_job(), options=manifests.SUBMITTED)


def test_unknown_fields_are_named_with_their_paths_and_a_close_name() -> None:
    doc = _job(backofLimit=2)
    pod = doc["spec"]["template"]["spec"]
    pod["containers"][0]["livenessProbe"]["httpGet"]["prot"] = 80
    pod["volumes"][1]["projected"]["sources"][0]["configMap"]["itmes"] = []
    pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "podAffinityTerm"
    ]["topologyKeys"] = "x"
    pod["xyzzy"] = 1
    assert sorted(_unknown(doc)) == [
        "spec.backofLimit: unknown field (did you mean backoffLimit?)",
        "spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
        ".podAffinityTerm.topologyKeys: unknown field (did you mean topologyKey?)",
        "spec.template.spec.containers[0].livenessProbe.httpGet.prot: unknown field (did you mean port?)",
        "spec.template.spec.volumes[1].projected.sources[0].configMap.itmes: unknown field (did you mean items?)",
        "spec.template.spec.xyzzy: unknown field",
    ]


def test_a_field_the_model_refuses_too_is_named_once() -> None:
    doc = _job()
    doc["spec"]["template"]["metadata"] = {"labelz": {"a": "b"}}
    assert _unknown(doc) == ["spec.template.metadata.labelz: unknown field (did you mean labels?)"]


def test_a_workloads_pod_templates_and_a_pod_are_checked() -> None:
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "queueName": "main",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "imag": "x"}]}},
                }
            ],
        },
    }
    assert _unknown(workload) == [
        "spec.podSets[0].template.spec.containers[0].imag: unknown field (did you mean image?)"
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [], "nodeSelecter": {}},
    }
    assert _unknown(pod) == ["spec.nodeSelecter: unknown field (did you mean nodeSelector?)"]


def test_objects_read_back_from_an_api_server_keep_fields_newer_than_the_table() -> None:
    doc = _job()
    doc["spec"]["template"]["spec"]["someFieldOfKubernetes2"] = True
    for options in (manifests.STRICT, manifests.RELAXED):
        parsed = manifests.parse_object(doc, options=options)
        assert manifests.to_manifest(parsed)["spec"]["template"]["spec"]["someFieldOfKubernetes2"] is True
