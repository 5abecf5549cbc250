"""Finding 4: deleting an Identity did not revoke its token, and there was no way to revoke one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..helpers import Server
from .common import tenant, two_teams


def test_deleting_or_revoking_an_identity_ends_its_token_at_once(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    dave = tenant(server, "dave", "research")
    assert server.request("GET", "/api/v1/whoami", token=dave).status_code == 200
    deleted = server.cli("delete", "identity", "dave")
    assert deleted.returncode == 0, deleted.stderr
    assert "Identity/dave deleted" in deleted.stdout
    gone = server.request("GET", "/api/v1/whoami", token=dave)
    assert gone.status_code == 401 and gone.json()["error"] == "unknown or revoked token"

    erin = tenant(server, "erin", "research")
    assert server.request("GET", "/api/v1/jobs", token=erin).status_code == 200
    revoked = server.cli("token", "revoke", "erin")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    assert server.request("GET", "/api/v1/jobs", token=erin).status_code == 401
    listed = server.cli("token", "list")
    assert "erin" in listed.stdout and "dave" not in listed.stdout

    fresh = tenant(server, "erin", "research")
    assert server.request("GET", "/api/v1/jobs", token=fresh).status_code == 200
    assert server.request("GET", "/api/v1/jobs", token=erin).status_code == 401

    # A tenant can do none of it, and no listing shows a token's hash.
    assert server.request("POST", "/api/v1/identities/erin/revoke", token=fresh).status_code == 403
    assert server.request("DELETE", "/api/v1/identities/erin", token=fresh).status_code == 403
    shown = server.api("GET", "/api/v1/objects/Identity")
    assert shown and all("tokenSha256" not in i["spec"] for i in shown)
