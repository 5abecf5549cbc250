"""Issue 43 item 2: the caller is a dependency of every route, checked before anything else.

The routes live in one router per resource (`standalone.http.routes`); these tests
walk every route the app serves, so a route added without the caller dependency fails here.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
from fastapi.routing import iter_route_contexts

from pykueue.api import access
from pykueue.standalone.http import auth
from pykueue.standalone.http.app import ServerContext, create_app
from pykueue.standalone.http.limits import Limits
from pykueue.store.sqlite import SQLiteStore

# Served to anyone: the health check and the dashboard's page (which holds no data).
OPEN_PATHS = {"/healthz", "/dashboard", "/dashboard/static/{name}"}
T = TypeVar("T")


def _run(
    tmp_path: Path, scenario: Callable[[httpx.AsyncClient, dict[str, str]], Awaitable[T]], limits: Limits
) -> T:
    """``scenario(client, tokens)`` against the app on a real store (no engine: no route gets that far
    but those that need none); ``tokens`` has a tenant's, ``alice``."""
    store = SQLiteStore(tmp_path / "data" / "pykueue.db")

    async def main() -> T:
        ctx = ServerContext(
            store=store,
            admission=None,  # type: ignore[arg-type]
            manager=None,  # type: ignore[arg-type]
            executor=None,  # type: ignore[arg-type]
            authenticator=auth.Authenticator(store),
            node=None,  # type: ignore[arg-type]
            data_dir=tmp_path / "data",
            limits=limits,
        )
        token = auth.new_token()
        await store.create(
            auth.identity_manifest(access.Identity("alice", access.TENANT, ("research",)), token)
        )
        transport = httpx.ASGITransport(app=create_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await scenario(client, {"alice": token})

    try:
        return asyncio.run(main())
    finally:
        store.close()


def _guarded_routes() -> list[tuple[str, str]]:
    """(method, path) of every route but the open ones, with values that do not fit the typed ones."""
    app = create_app(ServerContext.__new__(ServerContext))
    found = []
    for route in iter_route_contexts(app.routes):  # the routes inside each included router
        assert route.path is not None and route.methods, route
        if route.path in OPEN_PATHS:
            continue
        # "abc" fits no int: an unauthenticated caller must not learn even that.
        path = re.sub(r"\{[^}]+\}", "abc", route.path)
        for method in sorted(route.methods):
            found.append((method, path + "?after=abc&limit=abc&since=abc&until=abc"))
    return found


def test_every_route_but_the_open_ones_refuses_a_request_without_a_caller_first(tmp_path: Path) -> None:
    routes = _guarded_routes()
    assert len(routes) == 22, routes  # every route of the app's docstring but the open ones

    async def scenario(client: httpx.AsyncClient, _: dict[str, str]) -> list[tuple[str, httpx.Response, str]]:
        answers = []
        for method, path in routes:
            answers.append((path, await client.request(method, path), "no token"))
            bad = {"Authorization": "Bearer pk_not-a-token"}
            answers.append(
                (path, await client.request(method, path, headers=bad), "unknown or revoked token")
            )
        return answers

    for path, answer, says in _run(tmp_path, scenario, Limits()):
        assert answer.status_code == 401, (path, answer.status_code, answer.text)
        assert says in answer.json()["error"], (path, answer.text)


def test_a_caller_then_sees_the_route_s_own_refusal_of_its_values(tmp_path: Path) -> None:
    async def scenario(client: httpx.AsyncClient, tokens: dict[str, str]) -> list[httpx.Response]:
        headers = {"Authorization": f"Bearer {tokens['alice']}"}
        return [
            await client.get("/api/v1/events?after=abc", headers=headers),
            await client.get("/api/v1/policy/revisions/abc", headers=headers),
            await client.get("/api/v1/identities", headers=headers),
        ]

    after, revision, identities = _run(tmp_path, scenario, Limits())
    assert (after.status_code, after.json()["error"]) == (422, "the request's values do not fit this route")
    assert any("query.after" in p for p in after.json()["problems"]), after.text
    assert revision.status_code == 422 and "path.rev" in revision.text, revision.text
    assert identities.status_code == 403, identities.text
    assert identities.json()["error"] == "tenant alice may not list identities: only admins may"


def test_each_request_counts_once_against_the_tenant_s_rate(tmp_path: Path) -> None:
    async def scenario(client: httpx.AsyncClient, tokens: dict[str, str]) -> list[httpx.Response]:
        headers = {"Authorization": f"Bearer {tokens['alice']}"}
        paths = ["/api/v1/whoami", "/api/v1/policy/history", "/api/v1/events", "/api/v1/whoami"]
        return [await client.get(path, headers=headers) for path in paths]

    *admitted, refused = _run(tmp_path, scenario, Limits(requests_per_second=0.001, burst=3))
    assert [a.status_code for a in admitted] == [200, 200, 200], [a.text for a in admitted]
    assert refused.status_code == 429, refused.text
