"""Two `pykueue controller --local-webhooks --leader-elect` replicas: webhooks stay served while one is up.

Each replica serves the webhooks on its own port; the API server's configurations hold one URL.
The lease holder keeps them pointed at itself; a standby takes them over only when the
registered replica stops answering (`pykueue.kube.local_registration`).
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from pykueue.kube import deploy

from ..controller.conftest import PYKUEUE, WEBHOOK_CONFIGURATIONS, Kueue, job_manifest, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import ApiError, KubeCluster
from .conftest import Controller, Controllers

REPLICA_ARGS = ("--leader-elect", "--local-webhooks", "--webhook-host", "127.0.0.1", "--webhook-port", "0")


def registered_url(cluster: KubeCluster) -> str:
    config = cluster.get_or_none(
        f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{deploy.VALIDATING_WEBHOOK}"
    )
    if not config:
        return ""
    parts = urlsplit(str(config["webhooks"][0]["clientConfig"]["url"]))
    return f"{parts.scheme}://{parts.netloc}"


def served_url(replica: Controller) -> str:
    """The URL a replica's webhook server listens on, from its log."""
    for line in replica.log().splitlines():
        if "webhook server listening on " in line:
            return line.rsplit("webhook server listening on ", 1)[1].strip()
    return ""


def create_job(kueue: Kueue, ns: str, name: str) -> dict[str, Any] | str:
    """The created Job, or the API server's refusal as text (a webhook it cannot reach)."""
    try:
        return kueue.create_job(ns, job_manifest(name, "queue", run_duration="600s", suspend=False))
    except ApiError as exc:
        return str(exc)


@pytest.fixture
def lease_namespace(kwok_cluster: KubeCluster, controllers: Controllers) -> Iterator[str]:
    """The replicas' namespace; afterwards no webhook configuration points at a stopped replica."""
    name = f"pykueue-ha-{secrets.token_hex(3)}"
    try:
        yield name
    finally:
        # Every replica first: one still running would register itself again within a check.
        controllers.stop_all()
        for kind, config in WEBHOOK_CONFIGURATIONS:
            kwok_cluster.delete(f"/apis/admissionregistration.k8s.io/v1/{kind.lower()}s/{config}")
        # The CRDs' conversion pointed at the replicas too: back to the session's CRDs.
        subprocess.run(
            [PYKUEUE, "install", "--crds-only", "--kubeconfig", str(kwok_cluster.kubeconfig)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        kwok_cluster.delete(f"/api/v1/namespaces/{name}")


def test_webhooks_stay_served_while_any_local_replica_is_up(
    kwok_cluster: KubeCluster,
    kueue: Kueue,
    controllers: Controllers,
    lease_namespace: str,
    kube_namespace: str,
) -> None:
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    args = (*REPLICA_ARGS, "--lease-namespace", lease_namespace)
    leader = controllers.start(*args)
    leader.wait_running(60)
    wait(
        lambda: registered_url(kwok_cluster) == served_url(leader),
        30,
        "the leader's registration",
        describe=lambda: (registered_url(kwok_cluster), served_url(leader), leader.log()[-1500:]),
    )

    standby = controllers.start(*args)
    standby.wait_serving(60)
    wait(lambda: served_url(standby) != "", 30, "the standby's webhook server")
    # A standby that came later leaves a live leader registered (it used to take the URL over).
    for _ in range(3):
        time.sleep(2.5)  # more than one check period of the standby
        assert registered_url(kwok_cluster) == served_url(leader), standby.log()[-2000:]

    # kill -9 of the standby: Jobs are still created, suspended by the leader's webhook.
    standby.kill()
    job = create_job(kueue, ns, "after-standby")
    assert not isinstance(job, str), job
    assert job["spec"]["suspend"] is True

    # A new standby, then kill -9 of the registered leader: the standby takes the URL over
    # before it even holds the lease, and Jobs are created again.
    standby = controllers.start(*args)
    standby.wait_serving(60)
    wait(lambda: served_url(standby) != "", 30, "the new standby's webhook server")
    leader.kill()
    wait(
        lambda: registered_url(kwok_cluster) == served_url(standby),
        30,
        "the standby to register itself",
        describe=lambda: standby.log()[-2000:],
    )
    outcome: list[dict[str, Any] | str] = []

    def created() -> bool:
        outcome[:] = [create_job(kueue, ns, f"after-leader-{len(kueue.applied)}")]
        return not isinstance(outcome[0], str)

    wait(created, 30, "a Job created through the standby's webhook", describe=lambda: str(outcome))
    made = outcome[0]
    assert not isinstance(made, str) and made["spec"]["suspend"] is True
    # The replica left holds the lease in time and admits.
    wait(lambda: "acquired lease" in standby.log(), 40, "the standby to lead")
