"""pykueue's webhook server called by a real API server: Jobs, Kueue validation, conversion, certificates.

The server runs in this process (its own event loop on a thread) on 127.0.0.1 with a
certificate it made itself; the webhook configurations and the CRDs' conversion point
at it by URL with its CA bundle, as `pykueue manifests` points them at the Service.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import secrets
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from pykueue.api import crd
from pykueue.kube import certs, deploy, webhooks
from pykueue.store import kubernetes

from .controlplane import ApiError, KubeCluster, wait_for
from .crd_helpers import CRD_PATH, install_crds

pytestmark = pytest.mark.kube

T = TypeVar("T")
KUEUE = "/apis/kueue.x-k8s.io"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


class Harness:
    """The webhook server on a background event loop, and the cluster it serves."""

    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.cluster = cluster
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="webhook-loop", daemon=True)
        self.thread.start()
        self.store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(cluster.kubeconfig))
        self.config = webhooks.WebhookConfig(
            host="127.0.0.1",
            port=0,
            certs=certs.CertConfig(namespace=namespace, hosts=("127.0.0.1", "localhost")),
        )
        self.server = webhooks.WebhookServer(self.config, self.store, rotate=False)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    @property
    def client(self) -> crd.WebhookClientConfig:
        assert self.server.certificates is not None
        return crd.WebhookClientConfig(
            url=f"https://127.0.0.1:{self.server.port}", ca_bundle=self.server.certificates.ca_bundle
        )

    def close(self) -> None:
        self.run(self.server.stop())
        self.run(self.store.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def _apply_config(cluster: KubeCluster, doc: dict[str, Any]) -> None:
    plural = (
        "mutatingwebhookconfigurations"
        if doc["kind"].startswith("Mutating")
        else "validatingwebhookconfigurations"
    )
    cluster.delete(f"{ADMISSION}/{plural}/{doc['metadata']['name']}")
    cluster.create(f"{ADMISSION}/{plural}", doc)


@pytest.fixture(scope="module")
def harness(kube_apiserver: KubeCluster) -> Iterator[Harness]:
    install_crds(kube_apiserver)
    system = f"pykueue-system-{secrets.token_hex(3)}"
    kube_apiserver.create_namespace(system)
    h = Harness(kube_apiserver, system)
    h.run(h.server.start())
    try:
        client = h.client
        _apply_config(kube_apiserver, deploy.mutating_webhook_configuration(client, system))
        _apply_config(kube_apiserver, deploy.validating_webhook_configuration(client, system))
        install_crds(kube_apiserver, client)
        yield h
    finally:
        kube_apiserver.delete(f"{ADMISSION}/mutatingwebhookconfigurations/{deploy.MUTATING_WEBHOOK}")
        kube_apiserver.delete(f"{ADMISSION}/validatingwebhookconfigurations/{deploy.VALIDATING_WEBHOOK}")
        install_crds(kube_apiserver)  # conversion back to None: the server is going away
        h.close()
        kube_apiserver.delete(f"/api/v1/namespaces/{system}")


def _job(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, **({"labels": labels} if labels is not None else {})},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.invalid/x:1",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                }
            }
        },
    }


def _create_job(cluster: KubeCluster, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    return dict(cluster.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job))


# --- Jobs ------------------------------------------------------------------------------------


def test_queue_named_job_is_created_suspended(harness: Harness, kube_namespace: str) -> None:
    job = _create_job(
        harness.cluster, kube_namespace, _job("queued", {"kueue.x-k8s.io/queue-name": "user-queue"})
    )
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"


def test_job_without_queue_is_left_alone(harness: Harness, kube_namespace: str) -> None:
    job = _create_job(harness.cluster, kube_namespace, _job("plain", {"team": "a"}))
    assert job["spec"]["suspend"] is False
    assert job["metadata"]["labels"] == {"team": "a"}


def test_job_without_queue_gets_the_namespace_default_local_queue(
    harness: Harness, kube_namespace: str
) -> None:
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default"},
        "spec": {"clusterQueue": "cluster-queue"},
    }
    harness.cluster.create(f"{KUEUE}/v1beta2/namespaces/{kube_namespace}/localqueues", lq)
    job = _create_job(harness.cluster, kube_namespace, _job("defaulted"))
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"}
    assert job["spec"]["suspend"] is True
    # A job naming its own queue keeps it.
    own = _create_job(harness.cluster, kube_namespace, _job("own", {"kueue.x-k8s.io/queue-name": "other"}))
    assert own["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "other"


def test_job_rules_are_enforced_by_the_api_server(harness: Harness, kube_namespace: str) -> None:
    cluster = harness.cluster
    bad = _job(
        "bad-limit", {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/max-exec-time-seconds": "0"}
    )
    with pytest.raises(ApiError) as err:
        _create_job(cluster, kube_namespace, bad)
    message = err.value.body["message"]
    assert 'admission webhook "vjob.pykueue.io" denied the request' in message
    assert 'Job.batch "bad-limit" is invalid' in message
    assert "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]" in message
    # A Job running without a queue cannot be put in one: its pods already run outside Kueue.
    running = _create_job(cluster, kube_namespace, _job("running", {"team": "a"}))
    assert running["spec"]["suspend"] is False
    path = f"/apis/batch/v1/namespaces/{kube_namespace}/jobs/running"

    def refused() -> str | None:
        # Read fresh each time: Kubernetes' job controller may be writing the Job's status.
        job = cluster.get(path)
        job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
        try:
            cluster.request("PUT", path, job)
        except ApiError as exc:
            return None if exc.status == 409 else str(exc.body["message"])
        raise AssertionError("a running Job was moved into a queue")

    message = wait_for(refused, timeout=30, what="the label change refused")
    assert "metadata.labels[kueue.x-k8s.io/queue-name]: field is immutable" in message
    # A held Job may move to another queue.
    _create_job(cluster, kube_namespace, _job("held", {"kueue.x-k8s.io/queue-name": "user-queue"}))
    held_path = f"/apis/batch/v1/namespaces/{kube_namespace}/jobs/held"

    def move() -> dict[str, Any] | None:
        # Kubernetes' job controller may write the Job meanwhile: read it again on a conflict.
        held = cluster.get(held_path)
        held["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other-queue"
        try:
            moved: dict[str, Any] = cluster.request("PUT", held_path, held)
        except ApiError as exc:
            if exc.status == 409 and "modified" in str(exc.body):
                return None
            raise
        return moved

    moved = wait_for(move, timeout=30, what="the held Job moved")
    assert moved["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "other-queue"


# --- Kueue objects: what CEL cannot check ------------------------------------------------------


def _cq(name: str, spec: dict[str, Any], version: str = "v1beta2") -> dict[str, Any]:
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _quota(name: str, nominal: str, **limits: str) -> dict[str, Any]:
    return {"name": name, "nominalQuota": nominal, **limits}


INVALID = {
    "lendingLimit above nominalQuota": (
        {
            "cohortName": "team",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [_quota("cpu", "2", lendingLimit="3")]}],
                }
            ],
        },
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
    ),
    "a resource in two resource groups": (
        {
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [_quota("cpu", "1")]}]},
                {"coveredResources": ["cpu"], "flavors": [{"name": "g", "resources": [_quota("cpu", "1")]}]},
            ]
        },
        "spec.resourceGroups[1].coveredResources[0]",
    ),
}


@pytest.mark.parametrize("spec, path", INVALID.values(), ids=INVALID.keys())
def test_invalid_cluster_queue_is_refused_by_our_webhook(
    harness: Harness, spec: dict[str, Any], path: str
) -> None:
    with pytest.raises(ApiError) as err:
        harness.cluster.create(f"{KUEUE}/v1beta2/clusterqueues", _cq(f"bad-{secrets.token_hex(3)}", spec))
    message = err.value.body["message"]
    assert 'admission webhook "vkueue.pykueue.io" denied the request' in message
    assert path in message
    causes = err.value.body.get("details", {}).get("causes", [])
    assert any(c.get("field") == path for c in causes)


def test_update_rules_apply(harness: Harness) -> None:
    name = f"ac-{secrets.token_hex(3)}"
    path = f"{KUEUE}/v1beta2/admissionchecks"
    ac = harness.cluster.create(
        path,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": {"controllerName": "a"},
        },
    )
    try:
        ac["spec"]["controllerName"] = "b"
        with pytest.raises(ApiError) as err:
            harness.cluster.request("PUT", f"{path}/{name}", ac)
        assert "spec.controllerName" in err.value.body["message"]
    finally:
        harness.cluster.delete(f"{path}/{name}")


# --- conversion ----------------------------------------------------------------------------------


def test_v1beta1_cluster_queue_is_stored_as_v1beta2_and_read_back_in_both(harness: Harness) -> None:
    name = f"conv-{secrets.token_hex(3)}"
    spec = {
        "cohort": "research",
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [_quota("cpu", "4")]}]}
        ],
    }
    harness.cluster.create(f"{KUEUE}/v1beta1/clusterqueues", _cq(name, spec, "v1beta1"))
    try:
        v2 = harness.cluster.get(f"{KUEUE}/v1beta2/clusterqueues/{name}")
        assert v2["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert v2["spec"]["cohortName"] == "research"
        assert "cohort" not in v2["spec"]
        # Defaults of v1beta2 were filled in on the way in.
        assert v2["spec"]["queueingStrategy"] == "BestEffortFIFO"
        assert v2["spec"]["preemption"]["withinClusterQueue"] == "Never"
        v1 = harness.cluster.get(f"{KUEUE}/v1beta1/clusterqueues/{name}")
        assert v1["apiVersion"] == "kueue.x-k8s.io/v1beta1"
        assert v1["spec"]["cohort"] == "research"
        assert "cohortName" not in v1["spec"]
        # kubectl, asking for the v1beta1 resource explicitly.
        out = harness.cluster.kubectl(
            "get", f"clusterqueues.v1beta1.kueue.x-k8s.io/{name}", "-o", "jsonpath={.spec.cohort}"
        )
        assert out == "research"
        # An update through v1beta1 lands in v1beta2.
        v1["spec"]["cohort"] = "engineering"
        harness.cluster.request("PUT", f"{KUEUE}/v1beta1/clusterqueues/{name}", v1)
        assert (
            harness.cluster.get(f"{KUEUE}/v1beta2/clusterqueues/{name}")["spec"]["cohortName"]
            == "engineering"
        )
    finally:
        harness.cluster.delete(f"{KUEUE}/v1beta2/clusterqueues/{name}")


def test_invalid_v1beta1_object_is_refused_after_conversion(harness: Harness) -> None:
    spec = {
        "cohort": "team",
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [_quota("cpu", "1", lendingLimit="5")]}],
            }
        ],
    }
    with pytest.raises(ApiError) as err:
        harness.cluster.create(
            f"{KUEUE}/v1beta1/clusterqueues", _cq(f"bad-{secrets.token_hex(3)}", spec, "v1beta1")
        )
    assert "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit" in err.value.body["message"]


# --- certificates --------------------------------------------------------------------------------


def test_certificate_is_stored_published_and_rotated(harness: Harness, kube_namespace: str) -> None:
    cluster, config = harness.cluster, harness.config.certs
    secret = cluster.get(f"/api/v1/namespaces/{config.namespace}/secrets/{config.secret_name}")
    first = certs.Certificates.from_secret_data(secret["data"])
    assert harness.server.certificates is not None
    assert first.serving.cert == harness.server.certificates.serving.cert
    assert certs.hosts_of(first.serving.certificate) == {"127.0.0.1", "localhost"}

    # Publishing writes the bundle into the webhook configurations and the conversion CRDs.
    assert harness.run(certs.publish(harness.store, config, first.ca_bundle)) == []  # already there
    mutating = cluster.get(f"{ADMISSION}/mutatingwebhookconfigurations/{deploy.MUTATING_WEBHOOK}")
    assert {base64.b64decode(w["clientConfig"]["caBundle"]) for w in mutating["webhooks"]} == {
        first.ca_bundle
    }

    # Rotation: a policy that finds the certificate too close to expiry renews it, keeps the
    # old CA in the bundle, publishes it, and the running server switches to the new pair.
    eager = dataclasses.replace(config, renew_before=datetime.timedelta(days=400))
    rotator = certs.Rotator(harness.store, eager, harness.server._use, current=first)
    second = harness.run(rotator.refresh())
    assert second.serving.cert != first.serving.cert
    assert certs.split_pem(second.ca_bundle)[1:] == certs.split_pem(first.ca_bundle)[:1]
    assert harness.server.certificates is second
    crd_doc = cluster.get(f"{CRD_PATH}/clusterqueues.kueue.x-k8s.io")
    published = crd_doc["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"]
    assert base64.b64decode(published) == second.ca_bundle
    validating = cluster.get(f"{ADMISSION}/validatingwebhookconfigurations/{deploy.VALIDATING_WEBHOOK}")
    assert base64.b64decode(validating["webhooks"][0]["clientConfig"]["caBundle"]) == second.ca_bundle

    # The API server still reaches the webhook (new handshake, new certificate, new bundle).
    def suspended() -> bool:
        name = f"after-rotation-{secrets.token_hex(3)}"
        job = _create_job(cluster, kube_namespace, _job(name, {"kueue.x-k8s.io/queue-name": "q"}))
        return bool(job["spec"]["suspend"])

    assert wait_for(suspended, timeout=30, what="the webhook after rotation")
    # A second refresh with the normal policy keeps what is there.
    again = harness.run(certs.Rotator(harness.store, config, harness.server._use, current=second).refresh())
    assert again.serving.cert == second.serving.cert


def test_probes_answer_over_tls_trusted_by_the_published_bundle(harness: Harness) -> None:
    assert harness.server.certificates is not None
    context = ssl.create_default_context(cadata=harness.server.certificates.ca_bundle.decode())
    base = f"https://127.0.0.1:{harness.server.port}"
    for path in ("/healthz", "/readyz"):
        with urllib.request.urlopen(base + path, context=context, timeout=10) as response:
            assert response.read() == b"ok"
    bad = urllib.request.Request(base + webhooks.VALIDATE_KUEUE_PATH, data=b"[]", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad, context=context, timeout=10)
    assert err.value.code == 400
