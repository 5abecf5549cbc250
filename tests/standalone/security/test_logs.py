"""Finding 2 (and 8e): the logs API followed a Workload's owner reference, and a path, anywhere."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx

from pykueue.api import access
from pykueue.standalone.http import auth
from pykueue.standalone.http.app import ServerContext, create_app
from pykueue.store.sqlite import SQLiteStore

from ..helpers import Server, job, wait_until
from .common import job_state, tenant, two_teams
from .peer_client import raw_request


def _owned_by(name: str, owner: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "research",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "u-1", "controller": True}
            ],
        },
        "spec": {
            "queueName": "main",
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch"},
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                }
            ],
        },
    }


def test_no_owner_reference_or_path_reaches_another_tenants_log(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research", "--priority-class", "batch")
    assert server.apply([job("bobjob", "echo BOB-SECRET-OUTPUT", namespace="product")]).status_code == 200
    wait_until(lambda: job_state(server, "product/bobjob") == "Succeeded")

    # The job reconciler soon deletes a Workload whose owner does not exist; whether or not it
    # is still there, the answer is the same (the route itself is pinned by the test below).
    for name, owner in (("climb", "../product/bobjob"), ("escape", "../../../../secret"), ("deep", "bobjob")):
        stored = server.apply([_owned_by(name, owner)], token=alice)
        assert stored.status_code == 200, stored.text
        answer = server.request("GET", f"/api/v1/logs/research/{name}", token=alice)
        assert answer.status_code == 404, answer.text
        assert "BOB-SECRET-OUTPUT" not in answer.text

    # Dot segments, encoded or not, are names that cannot exist, for admins too: the server's
    # own log in the test's folder (data/logs/../..) is never served.
    for path in ("/api/v1/logs/%2e%2e/%2e%2e", "/api/v1/logs/research/%2e%2e", "/api/v1/logs/%2E%2E/product"):
        answer = raw_request(str(server.socket), "GET", path)
        assert answer.status in (404, 422), (path, answer.status, answer.text)
        assert "pykueue is serving" not in answer.text and "BOB-SECRET-OUTPUT" not in answer.text
        assert set(answer.json()) == {"error", "problems"}


def test_a_new_job_of_a_deleted_jobs_name_starts_with_no_logs(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    assert server.apply([job("reused", "echo FIRST-RUN", namespace="research")]).status_code == 200
    wait_until(lambda: job_state(server, "research/reused") == "Succeeded")
    first_uid = server.api("GET", "/api/v1/objects/Job/research/reused")["metadata"]["uid"]
    assert "FIRST-RUN" in server.cli("logs", "reused", "-n", "research").stdout
    assert server.cli("delete", "job", "reused", "-n", "research").returncode == 0
    wait_until(lambda: not (server.data / "logs" / "research" / "reused" / first_uid).exists())

    assert server.apply([job("reused", "echo SECOND-RUN", namespace="research")]).status_code == 200
    wait_until(lambda: job_state(server, "research/reused") == "Succeeded")
    output = server.cli("logs", "reused", "-n", "research").stdout
    assert "SECOND-RUN" in output and "FIRST-RUN" not in output


def test_the_logs_route_follows_no_owner_name_of_a_stored_workload(tmp_path: Path) -> None:
    """The route on a real store holding a hostile Workload, with no reconciler to delete it."""
    store = SQLiteStore(tmp_path / "data" / "pykueue.db")
    bob_job = job("bobjob", "true", namespace="product")
    bob_job["metadata"]["uid"] = "bob-uid"
    logs = tmp_path / "data" / "logs" / "product" / "bobjob"
    for folder in (logs, logs / "bob-uid"):  # where logs were kept before and after issue 14
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "0.log").write_text("BOB-SECRET-OUTPUT")
    (tmp_path / "data" / "logs" / "research" / "alicejob").mkdir(parents=True)  # alice has run jobs too
    alice = access.Identity("alice", access.TENANT, ("research",), ("batch",))

    async def scenario() -> list[httpx.Response]:
        await store.create(bob_job)
        await store.create(_owned_by("climb", "../product/bobjob"))
        await store.create(_owned_by("escape", "../../../../secret"))
        ctx = ServerContext(
            store=store,
            admission=None,  # type: ignore[arg-type]  # the logs route needs no engine
            manager=None,  # type: ignore[arg-type]
            executor=None,  # type: ignore[arg-type]
            authenticator=auth.Authenticator(store),
            node=None,  # type: ignore[arg-type]
            data_dir=tmp_path / "data",
        )
        token = auth.new_token()
        await store.create(auth.identity_manifest(alice, token))
        transport = httpx.ASGITransport(app=create_app(ctx))
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as client:
            return [await client.get(f"/api/v1/logs/research/{name}") for name in ("climb", "escape")]

    try:
        answers = asyncio.run(scenario())
    finally:
        store.close()
    for answer in answers:
        assert answer.status_code == 404, answer.text
        assert "BOB-SECRET-OUTPUT" not in answer.text
