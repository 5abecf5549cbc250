"""Finding 7 and 8a/8b: bad bodies got 500s and tracebacks; no size limits; odd values accepted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ..helpers import Server, job
from .common import two_teams

JSON = {"Content-Type": "application/json"}


def _shape(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "problems"}, body
    assert "Traceback" not in response.text
    return body


def test_every_bad_request_gets_a_clear_4xx_and_nothing_is_stored(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    big_env = job("huge", "true", namespace="research")
    big_env["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "X", "value": "y" * 10_000_000}]
    cases: list[tuple[str, str, dict[str, str], bytes, int, str]] = [
        ("POST", "/api/v1/apply", JSON, b"not json at all", 400, "not JSON"),
        ("POST", "/api/v1/apply", JSON, b"", 400, "not JSON"),
        (
            "POST",
            "/api/v1/apply",
            {"Content-Type": "application/yaml"},
            b"files: []",
            415,
            "application/json",
        ),
        ("POST", "/api/v1/apply", {}, b'{"files": []}', 415, "application/json"),
        ("POST", "/api/v1/apply", JSON, b"\xff\xfe\xfa", 400, "not JSON"),
        ("POST", "/api/v1/apply", JSON, b"[" * 100_000 + b"]" * 100_000, 400, "not JSON"),
        ("POST", "/api/v1/apply", JSON, b'{"files": ["x"]}', 422, "body.files[0]"),
        ("POST", "/api/v1/apply", JSON, b'{"files": [{"text": 5}]}', 422, "body.files[0].text"),
        ("POST", "/api/v1/apply", JSON, b"x" * (9 * 1024 * 1024), 413, "at most"),
        ("POST", "/api/v1/stop", JSON, b"[]", 422, "body"),
        ("POST", "/api/v1/stop", JSON, b'{"kind": "workload", "name": "../x"}', 422, "body.name"),
        ("POST", "/api/v1/resume", JSON, b'{"kind": "pod", "name": "x"}', 422, "body.kind"),
        ("POST", "/api/v1/identities", JSON, b"[]", 422, "body"),
        (
            "POST",
            "/api/v1/identities",
            JSON,
            b'{"name": "x", "namespaces": "research"}',
            422,
            "body.namespaces",
        ),
        ("POST", "/api/v1/identities", JSON, b'{"name": "x", "role": "root"}', 422, "body.role"),
        ("GET", "/api/v1/events?after=abc", {}, b"", 422, "query.after"),
        ("GET", "/api/v1/events?after=-1", {}, b"", 422, "query.after"),
        ("GET", "/api/v1/objects/Banana", {}, b"", 404, "path.kind"),
        ("GET", "/api/v1/objects/Job/Not_A_Namespace/x", {}, b"", 422, "path.namespace"),
        ("GET", "/api/v1/jobs?namespace=..", {}, b"", 422, "query.namespace"),
        ("DELETE", "/api/v1/objects/Job/research/%2e%2e", {}, b"", 422, "path.name"),
        ("DELETE", "/api/v1/objects/Job", {}, b"", 405, "Method Not Allowed"),
        ("GET", "/api/v1/no/such/route", {}, b"", 404, "Not Found"),
    ]
    before = server.api("GET", "/api/v1/objects/Job") + server.api("GET", "/api/v1/objects/Identity")
    for method, path, headers, body, status, mentions in cases:
        response = server.request(method, path, headers=headers, content=body)
        assert response.status_code == status, (path, body[:60], response.status_code, response.text[:300])
        shape = _shape(response)
        assert mentions in json.dumps(shape), (path, body[:60], shape)

    huge = server.apply([big_env])
    assert huge.status_code == 413, huge.text[:300]
    assert "at most 8388608" in _shape(huge)["error"]
    big_env["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "y" * 2_000_000
    big = server.apply([big_env])  # a request that may be this large, with one object that may not
    assert big.status_code == 413, big.text[:300]
    assert "Job/research/huge" in _shape(big)["problems"][0]
    negative = job("negative", "true", namespace="research", gpus=1)
    negative["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "-1"
    refused = server.apply([negative])
    assert refused.status_code == 422
    assert "requests[nvidia.com/gpu]: invalid value '-1': must be greater than or equal to 0" in refused.text
    after = server.api("GET", "/api/v1/objects/Job") + server.api("GET", "/api/v1/objects/Identity")
    assert after == before, "a refused request stored something"


def test_the_cli_refuses_bad_input_without_a_traceback(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes("kind: Job\nmetadata: {name: caf\xe9}\n".encode("latin-1"))
    result = server.cli("apply", "-f", str(latin))
    assert result.returncode == 1 and "not UTF-8 text" in result.stderr and "Traceback" not in result.stderr

    negative = server.cli("submit", "--queue", "main", "-n", "research", "--gpus", "-1", "--", "true")
    assert negative.returncode != 0 and "--gpus" in negative.stderr and "Traceback" not in negative.stderr
    assert server.jobs() == {}
    bad_env = server.cli("submit", "--queue", "main", "-n", "research", "-e", "NOEQUALS", "--", "true")
    assert bad_env.returncode == 1 and "KEY=VALUE" in bad_env.stderr
    assert server.jobs() == {}
