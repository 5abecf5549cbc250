"""The Helm chart (deploy/helm/pykueue): rendered by the real `helm`, the same objects as `pykueue manifests`,
applied to the real API server.

The CRDs and webhook configurations are applied with a server dry run: applied for real
they would point the session's CRDs and every Job at a webhook Service that does not run.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.kube import deploy

from .controlplane import KubeCluster, wait_for

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "pykueue"
FRAMEWORKS = [
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "pod",
    "deployment",
    # Queued through its pods, yet validated (its group size): the job webhook's rules list it.
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "kubeflow.org/pytorchjob",
    "trainer.kubeflow.org/trainjob",
]
# Cluster-wide objects the other tests would feel: checked by a server-side dry run only. (An
# APIService whose Service has no server breaks discovery, and with it namespace deletion.)
DRY_RUN_KINDS = (
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "APIService",
)


def helm(bin_dir: Path, *args: str, values: dict[str, Any] | None = None, check: bool = True) -> str:
    proc = subprocess.run(
        [str(bin_dir / "helm"), *args],
        input=yaml.safe_dump(values or {}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout + proc.stderr


def render(bin_dir: Path, namespace: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    out = helm(bin_dir, "template", "pykueue", str(CHART), "-n", namespace, "-f", "-", values=values)
    return [d for d in yaml.safe_load_all(out) if d]


def _normal(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    if doc["kind"] == "ConfigMap":
        doc["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
    if doc["kind"] == "Deployment":
        doc["spec"]["template"]["metadata"].pop("annotations", None)
    return doc


def by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): _normal(d) for d in docs if d["kind"] != "Namespace"}


CASES = [
    ({}, deploy.DeployConfig()),
    (
        {
            "leaderElection": True,
            "metrics": {"port": 8080, "serviceMonitor": True},
            "image": {"repository": "registry.example/pykueue", "tag": "9.9.9"},
            "configuration": {"manageJobsWithoutQueueName": True, "integrations": {"frameworks": FRAMEWORKS}},
        },
        deploy.DeployConfig(
            image="registry.example/pykueue:9.9.9",
            leader_elect=True,
            metrics_port=8080,
            service_monitor=True,
            frameworks=tuple(FRAMEWORKS),
            configuration=yaml.safe_dump(
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                    "kind": "Configuration",
                    "manageJobsWithoutQueueName": True,
                    "integrations": {"frameworks": FRAMEWORKS},
                }
            ),
        ),
    ),
]


@pytest.mark.parametrize(("values", "expected"), CASES, ids=["defaults", "operations-and-integrations"])
def test_chart_renders_what_pykueue_manifests_prints(
    kube_bin_dir: Path, values: dict[str, Any], expected: deploy.DeployConfig
) -> None:
    namespace = "team-system"
    chart = by_key(render(kube_bin_dir, namespace, values))
    mine = by_key(deploy.render(deploy.DeployConfig(**{**expected.__dict__, "namespace": namespace})))
    assert sorted(chart) == sorted(mine)
    for key, doc in mine.items():
        assert chart[key] == doc, f"{key} differs"


def test_chart_renders_with_plain_helm_template(kube_bin_dir: Path) -> None:
    # No --kube-version: offline, helm checks a chart's kubeVersion against its build's default
    # (v1.20 in a helm built from source, as hack/kube-binaries builds it), so the chart declares
    # none, as upstream's does.
    proc = subprocess.run(
        [str(kube_bin_dir / "helm"), "template", str(CHART)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert any(d and d["kind"] == "Deployment" for d in yaml.safe_load_all(proc.stdout))


def test_chart_refuses_an_unknown_framework(kube_bin_dir: Path) -> None:
    values = {"configuration": {"integrations": {"frameworks": ["batch/job", "acme.io/widget"]}}}
    out = helm(kube_bin_dir, "template", "pykueue", str(CHART), "-f", "-", values=values, check=False)
    assert 'unknown framework "acme.io/widget"' in out


def test_chart_applies_to_the_api_server_and_grants_the_kinds_it_manages(
    kube_apiserver: KubeCluster, kube_bin_dir: Path
) -> None:
    namespace = f"pykueue-helm-{secrets.token_hex(3)}"
    kube_apiserver.create_namespace(namespace)
    values = {"configuration": {"integrations": {"frameworks": FRAMEWORKS}}, "metrics": {"port": 8080}}
    docs = render(kube_bin_dir, namespace, values)
    real = [d for d in docs if d["kind"] not in DRY_RUN_KINDS]
    dry = [d for d in docs if d["kind"] in DRY_RUN_KINDS]
    try:
        out = kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(real))
        assert "deployment.apps/pykueue-controller-manager serverside-applied" in out

        # Applied again (an upgrade) after the aggregation controller filled in the aggregated
        # roles' rules (written here as that controller writes them, under its field manager: this
        # API server runs no controller-manager): the chart must not claim those rules, or the
        # apply conflicts with it.
        filled = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "kueue-batch-admin-role"},
            "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get"]}],
        }
        kube_apiserver.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=clusterrole-aggregation-controller",
            "-f",
            "-",
            input=yaml.safe_dump(filled),
        )
        again = kube_apiserver.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(real))
        assert "clusterrole.rbac.authorization.k8s.io/kueue-batch-admin-role serverside-applied" in again
        out = kube_apiserver.kubectl(
            # (forced: in a full run the CRDs are there already, applied by another field manager)
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-f",
            "-",
            input=yaml.safe_dump_all(dry),
        )
        assert out.count("customresourcedefinition.apiextensions.k8s.io/") == 11
        assert (
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/pykueue-mutating-webhook-configuration"
            in out
        )
        assert "apiservice.apiregistration.k8s.io/v1beta2.visibility.kueue.x-k8s.io" in out
        account = f"system:serviceaccount:{namespace}:pykueue-controller-manager"

        def can(verb: str, resource: str) -> bool:
            # A SubjectAccessReview, not `kubectl auth can-i`: kubectl cannot name the group of a
            # resource whose CRD is not installed here (jobsets, ...) and would ask about the core one.
            plural, _, group = resource.partition(".")
            review = kube_apiserver.create(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": account,
                        "resourceAttributes": {
                            "group": group,
                            "resource": plural,
                            "verb": verb,
                            "namespace": "x",
                        },
                    },
                },
            )
            return bool(review["status"].get("allowed"))

        # The API server's RBAC cache takes a moment to see the new ClusterRoleBinding.
        wait_for(lambda: can("update", "jobsets.jobset.x-k8s.io"), timeout=60, what="the ClusterRole bound")
        assert can("get", "clustertrainingruntimes.trainer.kubeflow.org")  # a TrainJob's pod sets
        assert can("delete", "pods")  # the pod integration stops pods by deleting them
        assert can("patch", "pytorchjobs.kubeflow.org")
        assert not can("update", "rayjobs.ray.io")  # not an enabled framework
        assert not can("delete", "jobs.batch")
        config = kube_apiserver.get(f"/api/v1/namespaces/{namespace}/configmaps/pykueue-manager-config")
        assert (
            yaml.safe_load(config["data"]["controller_manager_config.yaml"])["integrations"]["frameworks"]
            == FRAMEWORKS
        )
    finally:
        for kind, name in (
            ("clusterrolebinding", "pykueue-manager-rolebinding"),
            ("clusterrole", "pykueue-manager-role"),
        ):
            kube_apiserver.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        kube_apiserver.kubectl(
            "delete", "rolebinding", "pykueue-visibility-server-auth-reader", "-n", "kube-system", check=False
        )
        kube_apiserver.delete(f"/api/v1/namespaces/{namespace}")
