"""`pykueue manifests`: accepted by a real API server (server-side dry run), and least privilege."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.kube import deploy

from .controlplane import KubeCluster
from .crd_helpers import install_crds

pytestmark = pytest.mark.kube


def _render(
    namespace: str, image: str = "registry.example/pykueue:test", *flags: str
) -> tuple[str, list[dict[str, Any]]]:
    result = CliRunner().invoke(app, ["manifests", "--namespace", namespace, "--image", image, *flags])
    assert result.exit_code == 0, result.output
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    return result.stdout, docs


def _of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def test_cli_prints_every_piece_once(kube_namespace: str) -> None:
    _, docs = _render(kube_namespace)
    kinds = [doc["kind"] for doc in docs]
    assert kinds.count("CustomResourceDefinition") == 11
    # The manager's role, upstream's user-facing roles and the two that aggregate them.
    assert kinds.count("ClusterRole") == 1 + len(deploy.USER_ROLES) + 2
    for kind in (
        "Namespace",
        "ServiceAccount",
        "ClusterRoleBinding",
        "Role",
        "Secret",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Service",
        "Deployment",
    ):
        assert kinds.count(kind) == 1, kind
    # Ours in the namespace, and the one that lets the visibility API read the front-proxy settings.
    bindings = {(d["metadata"]["namespace"], d["roleRef"]["name"]) for d in _of(docs, "RoleBinding")}
    assert bindings == {
        (kube_namespace, "pykueue-leader-election-and-certs"),
        ("kube-system", "extension-apiserver-authentication-reader"),
    }
    # The visibility API: both versions behind the webhook Service, the CA published by the controller.
    services = {d["spec"]["version"]: d["spec"]["service"] for d in _of(docs, "APIService")}
    assert services == {
        version: {"name": deploy.SERVICE, "namespace": kube_namespace, "port": 443}
        for version in ("v1beta2", "v1beta1")
    }
    # Everything namespaced lands in the namespace asked for, and the CRDs convert through
    # the Service there.
    namespaced = [
        d for d in docs if d["kind"] in ("ServiceAccount", "Role", "Secret", "Service", "Deployment")
    ]
    assert {d["metadata"]["namespace"] for d in namespaced} == {kube_namespace}
    service = _of(docs, "CustomResourceDefinition")[0]["spec"]["conversion"]["webhook"]["clientConfig"][
        "service"
    ]
    assert service == {"namespace": kube_namespace, "name": deploy.SERVICE, "path": "/convert", "port": 443}
    container = _of(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/pykueue:test"


def test_deployment_is_locked_down() -> None:
    _, docs = _render("kueue-system")
    pod = _of(docs, "Deployment")[0]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["command"] == ["pykueue"] and container["args"][0] == "controller"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["ports"] == [{"name": "webhook", "containerPort": 9443, "protocol": "TCP"}]
    service = _of(docs, "Service")[0]
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"


def _by_name(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _of(docs, kind) if d["metadata"]["name"] == name]
    return doc


def _controller_flags() -> set[str]:
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    return {opt for param in command.commands["controller"].params for opt in param.opts}


def test_operations_flags_reach_every_piece() -> None:
    _, docs = _render(
        "ops",
        "registry.example/pykueue:test",
        "--metrics-port",
        "9191",
        "--leader-elect",
        "--service-monitor",
    )
    deployment = _of(docs, "Deployment")[0]
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--metrics-port=9191" in container["args"] and "--leader-elect" in container["args"]
    # Every flag the manifests hand the controller is one `pykueue controller` takes.
    assert {arg.split("=")[0] for arg in container["args"][1:]} <= _controller_flags()
    assert {"name": "metrics", "containerPort": 9191, "protocol": "TCP"} in container["ports"]
    metrics = _by_name(docs, "Service", deploy.METRICS_SERVICE)
    assert metrics["metadata"]["namespace"] == "ops"
    (port,) = metrics["spec"]["ports"]
    assert port["port"] == 9191 and port["targetPort"] == "metrics"
    assert metrics["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    (monitor,) = _of(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "ops"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ops"]}
    # It selects the metrics Service, and only it, and scrapes the port that Service names.
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [s for s in _of(docs, "Service") if selector.items() <= s["metadata"]["labels"].items()]
    assert selected == [metrics]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"


def test_operations_flags_turned_off() -> None:
    text, docs = _render("ops")
    assert text.startswith("apiVersion: v1\n") and "\n---\n" in text
    deployment = _of(docs, "Deployment")[0]
    assert deployment["spec"]["replicas"] == 1
    assert not [a for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"] if "metrics" in a]
    assert [s["metadata"]["name"] for s in _of(docs, "Service")] == [deploy.SERVICE]
    assert not _of(docs, "ServiceMonitor")

    flags = ("--metrics-port", "8080", "--no-leader-elect", "--no-service-monitor")
    _, docs = _render("ops", "registry.example/pykueue:test", *flags)
    deployment = _of(docs, "Deployment")[0]
    assert deployment["spec"]["replicas"] == 1
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--metrics-port=8080" in args and "--leader-elect" not in args
    assert _by_name(docs, "Service", deploy.METRICS_SERVICE)["spec"]["ports"][0]["port"] == 8080
    assert not _of(docs, "ServiceMonitor")

    # A ServiceMonitor needs a port to scrape.
    result = CliRunner().invoke(app, ["manifests", "--service-monitor"])
    assert result.exit_code == 2 and "--metrics-port" in result.output


def test_rbac_has_no_wildcards() -> None:
    _, docs = _render("kueue-system")
    rules = [rule for d in docs if d["kind"] in ("ClusterRole", "Role") for rule in d.get("rules", [])]
    assert rules
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule
            assert not any("*" in value for value in rule.get(key, []) if value), rule
    verbs = {verb for rule in rules for verb in rule["verbs"]}
    assert not verbs & {"escalate", "bind", "impersonate", "deletecollection"}


@pytest.mark.parametrize("flags", [(), ("--metrics-port", "8080", "--leader-elect")])
def test_manifests_pass_server_side_dry_run(
    kube_apiserver: KubeCluster, kube_namespace: str, flags: tuple[str, ...]
) -> None:
    install_crds(kube_apiserver)
    text, docs = _render(kube_namespace, "registry.example/pykueue:test", *flags)
    out = kube_apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=text)
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(docs)
    assert all(line.endswith("(server dry run)") for line in lines), out
    assert "deployment.apps/pykueue-controller-manager created (server dry run)" in out


@pytest.fixture
def applied_rbac(kube_apiserver: KubeCluster, kube_namespace: str) -> Iterator[str]:
    _, docs = _render(kube_namespace)
    rbac = [
        d
        for d in docs
        if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    text = yaml.safe_dump_all(rbac)
    kube_apiserver.kubectl("apply", "-f", "-", input=text)
    try:
        yield f"system:serviceaccount:{kube_namespace}:{deploy.SERVICE_ACCOUNT}"
    finally:
        kube_apiserver.kubectl("delete", "--ignore-not-found", "-f", "-", input=text)


CAN = [
    ("update", "jobs.batch", ""),
    ("patch", "jobs.batch", ""),
    ("update", "jobs.batch#status", ""),
    ("watch", "pods", ""),
    ("update", "pods", ""),  # the topology ungater
    ("update", "pods#status", ""),  # a pod on a failed node marked Failed (TAS)
    ("watch", "nodes", ""),  # topology-aware scheduling's node capacity
    ("create", "workloads.kueue.x-k8s.io", ""),
    ("update", "clusterqueues.kueue.x-k8s.io#status", ""),
    ("patch", "workloads.kueue.x-k8s.io#status", ""),
    ("list", "localqueues.kueue.x-k8s.io", ""),
    ("create", "events", ""),
    ("get", "priorityclasses.scheduling.k8s.io", ""),
    ("update", f"mutatingwebhookconfigurations/{deploy.MUTATING_WEBHOOK}", ""),
    ("patch", "customresourcedefinitions/clusterqueues.kueue.x-k8s.io", ""),
    ("update", f"secrets/{deploy.SECRET}", "OWN"),
    ("create", "leases.coordination.k8s.io", "OWN"),
    ("delete", "configmaps", "OWN"),  # policy history: a ConfigMap per revision
    # The visibility API: its APIServices' CA bundle, the API server's front-proxy settings.
    ("patch", "apiservices.apiregistration.k8s.io/v1beta2.visibility.kueue.x-k8s.io", ""),
    ("get", "configmaps/extension-apiserver-authentication", "kube-system"),
]
CANNOT = [
    ("delete", "jobs.batch", ""),
    ("create", "pods", ""),
    ("update", "clusterqueues.kueue.x-k8s.io", ""),
    ("update", "resourceflavors.kueue.x-k8s.io#status", ""),
    ("get", "secrets/other", "OWN"),
    ("get", f"secrets/{deploy.SECRET}", "default"),
    ("list", "secrets", "OWN"),
    ("update", "mutatingwebhookconfigurations/someone-elses", ""),
    ("update", "customresourcedefinitions/widgets.example.com", ""),
    ("create", "leases.coordination.k8s.io", "default"),
    ("create", "configmaps", "default"),
    ("update", "configmaps", "OWN"),  # a revision is never rewritten
    ("update", "nodes", ""),
    ("patch", "apiservices.apiregistration.k8s.io/v1.apps", ""),
    ("get", "configmaps/some-other", "kube-system"),
]


def _can(cluster: KubeCluster, user: str, verb: str, resource: str, namespace: str) -> bool:
    # "kind/name" names one object; "kind#sub" is a subresource.
    resource, _, sub = resource.partition("#")
    args = ["auth", "can-i", verb, resource, f"--as={user}"]
    args += [f"--subresource={sub}"] if sub else []
    args += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    return cluster.kubectl(*args, check=False).strip() == "yes"


def test_rbac_allows_what_the_controller_needs_and_nothing_more(
    kube_apiserver: KubeCluster, kube_namespace: str, applied_rbac: str
) -> None:
    def ns(where: str) -> str:
        return kube_namespace if where == "OWN" else where

    for verb, resource, where in CAN:
        # RBAC and API discovery reach kubectl a moment after the apply: poll, bounded.
        deadline = time.monotonic() + 15
        while (
            not _can(kube_apiserver, applied_rbac, verb, resource, ns(where)) and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        assert _can(kube_apiserver, applied_rbac, verb, resource, ns(where)), f"cannot {verb} {resource}"
    for verb, resource, where in CANNOT:
        assert not _can(kube_apiserver, applied_rbac, verb, resource, ns(where)), (
            f"may {verb} {resource} in {where}"
        )
