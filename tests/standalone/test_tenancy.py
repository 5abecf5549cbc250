"""Tokens, roles and refusals that say why."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from .helpers import EXAMPLES, Server, job, wait_until, write_config


def test_tenants_submit_only_where_and_how_they_are_allowed(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=4))
    assert json.loads((server.data / "client.json").read_text())["server"].startswith("http://127.0.0.1:")
    created = server.cli("token", "create", "alice", "-n", "research", "--priority-class", "batch")
    assert created.returncode == 0, created.stderr
    alice = created.stdout.strip()
    assert server.api("GET", "/api/v1/whoami", token=alice) == {
        "name": "alice",
        "role": "tenant",
        "namespaces": ["research"],
        "priorityClasses": ["batch"],
    }
    assert server.apply([job("admins-job", "true", namespace="product")]).status_code == 200

    cq = yaml.safe_load_all((EXAMPLES / "queues.yaml").read_text())
    refused = server.apply([next(cq)], token=alice)
    assert refused.status_code == 403
    assert "tenant alice may not manage ResourceFlavor objects" in refused.json()["problems"][0]

    other_namespace = server.apply([job("sneaky", "true", namespace="product")], token=alice)
    assert other_namespace.status_code == 403
    assert (
        "may only submit to namespaces research; Job/product/sneaky is in namespace product"
        in (other_namespace.json()["problems"][0])
    )

    urgent = server.apply([job("pushy", "true", namespace="research", priority_class="urgent")], token=alice)
    assert urgent.status_code == 403
    assert "not granted priority class urgent (granted: batch)" in urgent.json()["problems"][0]

    # A mixed apply is refused as a whole: the allowed job is not stored either.
    mixed = server.apply(
        [job("fine", "true", namespace="research"), job("sneaky", "true", namespace="product")], token=alice
    )
    assert mixed.status_code == 403
    assert "research/fine" not in server.jobs()

    ok = server.apply([job("fine", "true", namespace="research", priority_class="batch")], token=alice)
    assert ok.status_code == 200, ok.text
    wait_until(lambda: server.jobs().get("research/fine", {}).get("state") == "Succeeded")

    seen = {f"{w['namespace']}/{w['job']}" for w in server.api("GET", "/api/v1/workloads", token=alice)}
    assert seen == {"research/fine"}
    forbidden_read = server.request("GET", "/api/v1/describe/workload/product/admins-job", token=alice)
    assert forbidden_read.status_code == 403

    stop_cq = server.cli("stop", "clusterqueue", "research", token=alice)
    assert stop_cq.returncode == 1
    assert "tenant alice may not stop or resume ClusterQueues" in stop_cq.stderr
    assert "Traceback" not in stop_cq.stderr

    cli_refusal = server.cli(
        "submit", "--queue", "main", "-n", "product", "--wait", "0", "--", "true", token=alice
    )
    assert cli_refusal.returncode == 1
    assert "may only submit to namespaces research" in cli_refusal.stderr

    assert server.request("GET", "/api/v1/jobs", token="pk_not-a-token").status_code == 401
    no_token = httpx.get(server.url + "/api/v1/jobs", timeout=30)
    assert no_token.status_code == 401 and "no token" in no_token.json()["error"]
    no_grant = server.request(
        "POST", "/api/v1/identities", token=alice, json={"name": "mallory", "role": "admin"}
    )
    assert no_grant.status_code == 403


def test_tokens_are_stored_hashed(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server()
    assert server.token.encode() not in server.db.read_bytes()
    wal = server.db.with_name("pykueue.db-wal")
    assert not wal.exists() or server.token.encode() not in wal.read_bytes()
    assert oct((server.data / "client.json").stat().st_mode & 0o777) == "0o600"
