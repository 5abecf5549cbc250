"""Finding 1: a tenant's job ran as the server's user, in the data folder, with the server's environment."""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from pykueue.api.access import RUN_AS_UID_ANNOTATION
from pykueue.standalone.node import accounts
from pykueue.standalone.node.isolation import Isolation

from ..helpers import Server, job, wait_until
from .common import job_state, tenant, two_teams
from .peer_client import request_as

PROBE = (
    "echo uid=$(id -u); echo pwd=$(pwd); "
    "cat {data}/client.json && echo READ-CLIENT-JSON; "
    "cat ../../../client.json && echo READ-RELATIVE; "
    "cat {bob_log} && echo READ-BOB-LOG; "
    "ls {bob_folder} && echo LISTED-BOB-FOLDER; "
    "ls {work} && echo LISTED-WORK-ROOT; "
    "env | sort; true"
)


def test_a_tenants_job_runs_as_its_own_user_and_cannot_reach_the_server_or_other_tenants(
    tmp_path: Path,
    start_server: Callable[..., Server],
    user_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SERVER_ONLY_SECRET", "s3cr3t-of-the-server")
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research", "--priority-class", "batch")
    bob = tenant(server, "bob", "product", "--priority-class", "batch")

    bobs = job("bobjob", "echo BOB-SECRET-OUTPUT > notes.txt; echo BOB-SECRET-OUTPUT", namespace="product")
    assert server.apply([bobs], token=bob).status_code == 200
    wait_until(lambda: job_state(server, "product/bobjob") == "Succeeded")
    bob_uid = server.api("GET", "/api/v1/objects/Job/product/bobjob")["metadata"]["uid"]
    bob_log = server.data / "logs" / "product" / "bobjob" / bob_uid / "0.log"
    bob_folder = server.work / "product" / f"bobjob-{bob_uid[:8]}"
    assert "BOB-SECRET-OUTPUT" in bob_log.read_text() and (bob_folder / "notes.txt").exists()

    probe = PROBE.format(data=server.data, bob_log=bob_log, bob_folder=bob_folder, work=server.work)
    response = server.apply([job("probe", probe, namespace="research")], token=alice)
    assert response.status_code == 200, response.text
    wait_until(lambda: job_state(server, "research/probe") == "Succeeded")
    output = server.cli("logs", "probe", "-n", "research").stdout

    alice_user = pwd.getpwnam(f"{user_prefix}alice")
    assert alice_user.pw_uid != 0
    assert f"uid={alice_user.pw_uid}" in output
    for leaked in ("READ-", "LISTED-", server.token, "BOB-SECRET-OUTPUT", "SERVER_ONLY_SECRET"):
        assert leaked not in output, f"{leaked!r} reached the tenant's job"
    assert "Permission denied" in output
    folder = Path(next(line[4:] for line in output.splitlines() if line.startswith("pwd=")))
    assert folder.is_relative_to(server.work) and not folder.is_relative_to(server.data)
    info = folder.stat()
    assert info.st_uid == alice_user.pw_uid and stat.S_IMODE(info.st_mode) == 0o700
    assert f"HOME={folder}" in output and f"USER={alice_user.pw_name}" in output
    described = server.cli("describe", "workload", "probe", "-n", "research")
    assert f"Runs as:   {alice_user.pw_name} (submitted by alice)" in described.stdout

    # The owner is the server's to write: an annotation a tenant sends is dropped.
    forged = job("forged", "id -u", namespace="research")
    forged["metadata"]["annotations"] = {RUN_AS_UID_ANNOTATION: "0"}
    assert server.apply([forged], token=alice).status_code == 200
    stored = server.api("GET", "/api/v1/objects/Job/research/forged")["metadata"]["annotations"]
    assert stored[RUN_AS_UID_ANNOTATION] == str(alice_user.pw_uid)


def test_local_users_are_known_by_the_socket_and_their_jobs_run_as_them(
    tmp_path: Path, start_server: Callable[..., Server], unix_user: Callable[[str], pwd.struct_passwd]
) -> None:
    server = two_teams(tmp_path, start_server)
    carol = unix_user("carol")

    unknown = request_as(carol, str(server.socket), "GET", "/api/v1/whoami")
    assert unknown.status == 403 and "has no pykueue identity" in unknown.json()["error"]

    mapped = server.cli("token", "create", "carol", "-n", "research", "--unix-user", carol.pw_name)
    assert mapped.returncode == 0, mapped.stderr
    me = request_as(carol, str(server.socket), "GET", "/api/v1/whoami")
    assert me.status == 200 and me.json()["name"] == "carol" and me.json()["uid"] == carol.pw_uid

    home = server.shared / "carol-project"
    home.mkdir()
    os.chown(home, carol.pw_uid, carol.pw_gid)
    os.chmod(home, 0o700)
    mine = job("carols", "id -u > out.txt; pwd >> out.txt", namespace="research")
    mine["spec"]["template"]["spec"]["containers"][0]["workingDir"] = str(home)
    text = f"apiVersion: batch/v1\n{_yaml(mine)}"
    submitted = request_as(
        carol, str(server.socket), "POST", "/api/v1/apply", {"files": [{"name": "carols.yaml", "text": text}]}
    )
    assert submitted.status == 200, submitted.text
    wait_until(lambda: job_state(server, "research/carols") == "Succeeded")
    assert (home / "out.txt").read_text().split() == [str(carol.pw_uid), str(home)]

    # A folder its owner may not enter fails the pod, and says why.
    private = job("private", "true", namespace="research", backoff_limit=0)
    private["spec"]["template"]["spec"]["containers"][0]["workingDir"] = str(server.data)
    text = f"apiVersion: batch/v1\n{_yaml(private)}"
    assert (
        request_as(
            carol, str(server.socket), "POST", "/api/v1/apply", {"files": [{"name": "p", "text": text}]}
        ).status
        == 200
    )
    wait_until(lambda: job_state(server, "research/private") == "Failed")
    log = server.cli("logs", "private", "-n", "research").stdout
    assert f"could not enter its working folder {server.data} as {carol.pw_name}: Permission denied" in log

    # An identity may not be worth root.
    for user in ("root", "0"):
        refused = server.cli("token", "create", "mallory", "-n", "research", "--unix-user", user)
        assert refused.returncode == 1 and "may not be mapped to root" in refused.stderr


def test_a_server_that_is_not_root_says_tenants_are_not_isolated(tmp_path: Path) -> None:
    itself = accounts.RunAs(1234, 1234, (1234,), "someone", "/nonexistent")
    fences = Isolation(work_root=tmp_path, switch_users=False, cgroups=None, server=itself)
    summary = "\n".join(fences.summary())
    assert "not running as root: every job runs as uid 1234 (someone)" in summary
    assert "tenants are not isolated" in summary
    assert "no writable cgroup hierarchy" in summary
    stranger = {"metadata": {"annotations": {RUN_AS_UID_ANNOTATION: "0"}}}
    assert fences.run_as(stranger) == itself


def _yaml(manifest: dict[str, object]) -> str:
    import yaml

    body = dict(manifest)
    body.pop("apiVersion", None)
    return yaml.safe_dump(body)
