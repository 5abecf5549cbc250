"""Random bodies and paths at every route of a real server: never a 500, never a write on refusal.

Hypothesis makes the requests (JSON values of every shape, raw bytes, content
types, path segments); each goes to the running server over its socket as
root, an admin, so that nothing is refused for want of rights and the body
reaches every check. After every answer of 400 or more the store must hold
exactly what it held before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from ..helpers import Server
from .common import two_teams

POST_ROUTES = (
    "/api/v1/apply",
    "/api/v1/stop",
    "/api/v1/resume",
    "/api/v1/identities",
    "/api/v1/identities/x/revoke",
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)
KEYS = st.sampled_from(
    ["files", "name", "text", "kind", "namespace", "role", "namespaces", "priorityClasses", "unixUser"]
)
LIKELY = st.dictionaries(KEYS, JSON_VALUES, max_size=5) | st.fixed_dictionaries(
    {"files": st.lists(st.dictionaries(st.sampled_from(["name", "text"]), st.text(max_size=200)), max_size=3)}
)
SEGMENTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#"), min_size=1, max_size=20
) | st.sampled_from(["..", ".", "%2e%2e", "_", "default", "Job", "Workload", "Identity", "research"])


def _snapshot(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return sorted(conn.execute("SELECT kind, namespace, name FROM objects").fetchall())


def _check(server: Server, method: str, path: str, **kwargs: Any) -> None:
    before = _snapshot(server.db)
    response = server.request(method, path, **kwargs)
    assert response.status_code != 500, (method, path, kwargs, response.text[:500])
    assert response.status_code < 500, (method, path, response.status_code)
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error", "problems"}, body
        assert _snapshot(server.db) == before, f"{method} {path} was refused but stored something"


def test_random_requests_never_crash_the_server_or_store_on_refusal(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(route=st.sampled_from(POST_ROUTES), body=JSON_VALUES | LIKELY)
    def json_bodies(route: str, body: Any) -> None:
        _check(server, "POST", route, json=body)

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        route=st.sampled_from(POST_ROUTES),
        raw=st.binary(max_size=300),
        content_type=st.sampled_from(["application/json", "text/plain", "application/yaml", ""]),
    )
    def raw_bodies(route: str, raw: bytes, content_type: str) -> None:
        headers = {"Content-Type": content_type} if content_type else {}
        _check(server, "POST", route, content=raw, headers=headers)

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        method=st.sampled_from(["GET", "DELETE"]),
        template=st.sampled_from(
            [
                "/api/v1/objects/{0}",
                "/api/v1/objects/{0}/{1}/{2}",
                "/api/v1/describe/workload/{1}/{2}",
                "/api/v1/logs/{1}/{2}",
                "/api/v1/{0}",
                "/api/v1/identities/{2}",
            ]
        ),
        parts=st.tuples(SEGMENTS, SEGMENTS, SEGMENTS),
        query=st.dictionaries(st.sampled_from(["namespace", "after"]), st.text(max_size=10), max_size=2),
    )
    def paths(method: str, template: str, parts: tuple[str, str, str], query: dict[str, str]) -> None:
        quoted = [p if p == "%2e%2e" else quote(p, safe="") for p in parts]
        _check(server, method, template.format(*quoted), params=query)

    json_bodies()
    raw_bodies()
    paths()
