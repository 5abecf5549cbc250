"""`pykueue policy history | show | rollback` against a real server and its SQLite file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config

LQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "research", "namespace": "default"},
    "spec": {"clusterQueue": "research"},
}


def research(cpu: str) -> list[dict[str, Any]]:
    return [*yaml.safe_load_all(cluster_queue("research", cpu=cpu)), LQ]


def nominal(server: Server) -> str:
    cq = server.api("GET", "/api/v1/objects/ClusterQueue/_/research")
    return str(cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])


def token_for(server: Server, name: str, role: str) -> str:
    body = {"name": name, "role": role, "namespaces": ["default"]}
    return str(server.api("POST", "/api/v1/identities", json=body)["token"])


def test_history_survives_a_restart_and_a_rollback_is_shown_before_it_is_applied(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    at_start = server.api("GET", "/api/v1/policy/history")
    assert {r["kind"] for r in at_start} == {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
    assert all(r["who"].endswith("from the server's config") for r in at_start)

    ops = token_for(server, "ops", "admin")
    assert server.apply(research("2"), token=ops).status_code == 200
    assert server.apply(research("1"), token=ops).status_code == 200
    history = server.api("GET", "/api/v1/policy/history?name=research")
    assert [(r["kind"], r["operation"], r["who"]) for r in history] == [
        ("ClusterQueue", "create", "ops"),
        ("LocalQueue", "create", "ops"),
        ("ClusterQueue", "update", "ops"),
    ]
    created, change = history[1]["rev"], history[2]["rev"]  # the setup complete; its change

    # A restart re-applies the config (unchanged: no revision) and keeps the history.
    server.kill()
    server.start()
    assert server.api("GET", "/api/v1/policy/history") == [*at_start, *history]
    shown = server.cli("policy", "show", str(change))
    assert shown.returncode == 0, shown.stderr
    assert "Who:       ops" in shown.stdout
    assert 'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "2" -> "1"' in shown.stdout
    listed = server.cli("policy", "history", "--kind", "ClusterQueue", "--limit", "1")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[:5] == [
        str(change),
        history[2]["at"],
        "ops",
        "update",
        "ClusterQueue",
    ]

    # One CPU: the first job runs, the second waits for it.
    long_script = "trap 'exit 0' TERM; sleep 300 & wait"
    assert server.apply([job("first", long_script, queue="research")]).status_code == 200
    wait_until(lambda: server.jobs().get("default/first", {}).get("state") == "Running")
    assert server.apply([job("second", "true", queue="research")]).status_code == 200
    wait_until(lambda: (server.explanation("default", "second") or {}).get("state") == "Pending")

    dry = server.cli("policy", "rollback", str(created), "--format", "json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["applied"] is False
    assert [(o["kind"], o["name"], o["action"]) for o in plan["objects"]] == [
        ("ClusterQueue", "research", "restore")
    ]
    # Workloads are named after their Job, as Kueue names them (job-NAME-HASH).
    second = next(d for d in plan["differences"] if d["workload"].startswith("default/job-second-"))
    assert second["queue"] == "default/research"
    assert second["afterRollback"] == "admitted now" and second["now"] != "admitted now"
    text = server.cli("policy", "rollback", str(created))
    assert "Dry run: nothing changed" in text.stdout and "default/job-second-" in text.stdout
    assert nominal(server) == "1"
    assert len(server.api("GET", "/api/v1/policy/history")) == len(at_start) + 3
    assert server.jobs()["default/second"]["state"] == "Queued"

    # Only an admin may apply one; a tenant sees the what-if.
    tenant = token_for(server, "alice", "tenant")
    body = {"revision": created, "apply": True}
    refused = server.request("POST", "/api/v1/policy/rollback", token=tenant, json=body)
    assert refused.status_code == 403 and "only admins" in refused.json()["error"]
    assert nominal(server) == "1"

    applied = server.cli("policy", "rollback", str(created), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "ClusterQueue/research restored" in applied.stdout
    assert nominal(server) == "2"
    last = server.api("GET", "/api/v1/policy/history?limit=1")[0]
    assert (last["kind"], last["operation"], last["rev"]) == ("ClusterQueue", "update", change + 1)
    assert "(uid " in last["who"]  # the socket's caller, as the kernel named it
    assert server.api("GET", f"/api/v1/policy/revisions/{last['rev']}")["diff"] == [
        '  spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "1" -> "2"'
    ]
    wait_until(lambda: server.jobs()["default/second"]["state"] == "Succeeded")
    again = server.cli("policy", "rollback", str(created))
    assert "Nothing to roll back" in again.stdout


def test_bad_revisions_and_filters_are_refused_clearly(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="1") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    missing = server.request("GET", "/api/v1/policy/revisions/999")
    assert missing.status_code == 404 and "policy revision 999 not found" in missing.json()["error"]
    rollback = server.cli("policy", "rollback", "999")
    assert rollback.returncode == 1 and "policy revision 999 not found" in rollback.stderr
    kind = server.request("GET", "/api/v1/policy/history?kind=Job")
    assert kind.status_code == 404 and "unknown kind" in kind.json()["error"]
    negative = server.request("POST", "/api/v1/policy/rollback", json={"revision": -1})
    assert negative.status_code == 422
    # Past SQLite's 64-bit integers: not found, and all of the history.
    huge = 2**70
    missing = server.request("GET", f"/api/v1/policy/revisions/{huge}")
    assert missing.status_code == 404 and f"policy revision {huge} not found" in missing.json()["error"]
    assert len(server.api("GET", f"/api/v1/policy/history?limit={huge}")) == 3
    far = server.request("POST", "/api/v1/policy/rollback", json={"revision": huge})
    assert far.status_code == 422 and "body.revision" in far.text


def test_a_policy_annotation_added_or_removed_by_apply_is_stored_and_recorded(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="1") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    cq = yaml.safe_load(cluster_queue("research", cpu="2"))
    assert server.apply([cq]).json()["results"][0]["action"] == "created"

    def applied(annotations: dict[str, str]) -> tuple[str, dict[str, str], list[dict[str, Any]]]:
        cq["metadata"]["annotations"] = annotations
        action = server.apply([cq]).json()["results"][0]["action"]
        stored = server.api("GET", "/api/v1/objects/ClusterQueue/_/research")
        history = server.api("GET", "/api/v1/policy/history?kind=ClusterQueue&name=research")
        return action, stored["metadata"].get("annotations") or {}, history

    aging = {"pykueue.io/aging": '{"rate": "1/10m", "cap": 5}'}
    action, stored, history = applied(aging)
    assert (action, stored) == ("configured", aging)
    assert [r["operation"] for r in history] == ["create", "update"]
    assert any(
        "pykueue.io/aging" in line
        for line in server.cli("policy", "show", str(history[1]["rev"])).stdout.splitlines()
    )

    assert applied(aging)[0] == "unchanged"  # the same again: nothing stored, no revision
    action, stored, history = applied({})
    assert (action, stored) == ("configured", {})
    assert [r["operation"] for r in history] == ["create", "update", "update"]

    cq["metadata"]["labels"] = {"team": "research"}
    action, _, history = applied({})
    assert action == "configured" and len(history) == 4
    assert (
        server.api("GET", "/api/v1/objects/ClusterQueue/_/research")["metadata"]["labels"]
        == cq["metadata"]["labels"]
    )
