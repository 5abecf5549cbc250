"""Issue 41: the first day on a shared GPU server (a root server as the docs start it, long names,
pods that cannot start, a uid given to another user)."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml

from pykueue.api.access import RUN_AS_UID_ANNOTATION, RUN_AS_USER_ANNOTATION

from ..helpers import Server, job, wait_until
from .common import job_state, tenant, two_teams


def _failure(server: Server, key: str) -> dict[str, str]:
    namespace, name = key.split("/")
    stored = server.api("GET", f"/api/v1/objects/Job/{namespace}/{name}")
    conditions = (stored.get("status") or {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == "Failed")


def _cpu_used(server: Server, cluster_queue: str) -> str:
    row = next(r for r in server.api("GET", "/api/v1/clusterqueues") if r["name"] == cluster_queue)
    return str(next((u["used"] for u in row["usage"] if u["resource"] == "cpu"), "0"))


def test_a_root_server_started_as_the_docs_say_runs_a_token_users_yaml_job(
    tmp_path: Path, start_server: Callable[..., Server], user_prefix: str
) -> None:
    # `pykueue up` with no --work-dir (and no --config: a `main` queue sized to this machine).
    server = start_server(default_work_dir=True)
    alice = tenant(server, "alice", "default")
    manifest = tmp_path / "hello.yaml"
    manifest.write_text(yaml.safe_dump(job("hello", "echo hello from $(id -un) in $(pwd)")))
    applied = server.cli("apply", "-f", str(manifest), token=alice)
    assert applied.returncode == 0, applied.stderr

    wait_until(lambda: job_state(server, "default/hello") in ("Succeeded", "Failed"))
    output = server.cli("logs", "hello", "-n", "default", token=alice).stdout
    assert job_state(server, "default/hello") == "Succeeded", output
    user = pwd.getpwnam(f"{user_prefix}alice")
    said = next(line for line in output.splitlines() if line.startswith("hello from"))
    assert said.startswith(f"hello from {user.pw_name} in ")
    folder = Path(said.split(" in ", 1)[1])
    assert folder.parent == server.work / "default"
    assert folder.stat().st_uid == user.pw_uid and stat.S_IMODE(folder.stat().st_mode) == 0o700
    # Every folder above it may be passed through by others, not listed.
    for above in (folder.parent, server.work, server.work.parent, server.work.parent.parent):
        assert stat.S_IMODE(above.stat().st_mode) == 0o711, above


def test_a_pod_that_cannot_start_fails_its_job_with_the_cause_and_gives_back_its_quota(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research", "--priority-class", "batch")
    # The job's folder cannot be entered by its owner: the work dir is closed to other users.
    os.chmod(server.shared, 0o700)
    try:
        closed = job("closed", "echo RAN", namespace="research", priority_class="batch", cpu="8")
        assert server.apply([closed], token=alice).status_code == 200
        wait_until(lambda: job_state(server, "research/closed") == "Failed")
    finally:
        os.chmod(server.shared, 0o711)
    failed = _failure(server, "research/closed")
    assert failed["reason"] == "PodStartFailed"
    assert "could not enter its working folder" in failed["message"]
    assert f"{server.shared} is closed to other users" in failed["message"]
    described = server.cli("describe", "workload", "closed", "-n", "research", token=alice).stdout
    assert "PodStartFailed" in described and "could not enter its working folder" in described
    assert "RAN" not in server.cli("logs", "closed", "-n", "research", token=alice).stdout

    # A folder the server cannot make (a file where the namespace's folder goes) fails the job too.
    (server.work / "product").write_text("not a folder")
    assert server.apply([job("blocked", "echo RAN", namespace="product", cpu="8")]).status_code == 200
    wait_until(lambda: job_state(server, "product/blocked") == "Failed")
    failed = _failure(server, "product/blocked")
    assert failed["reason"] == "PodStartFailed" and "could not start" in failed["message"]

    # Both gave their quota back: a job that needs all of it runs.
    assert server.apply(
        [job("after", "true", namespace="research", priority_class="batch", cpu="8")], token=alice
    )
    wait_until(lambda: job_state(server, "research/after") == "Succeeded")
    assert _cpu_used(server, "product") == "0"
    assert "Traceback" not in server.log


def test_a_job_with_a_name_of_253_characters_runs(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    name = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(name) == 253
    twin = name[:-1] + "e"  # the same head: its folder must not be the first one's
    for each in (name, twin):
        response = server.apply([job(each, "pwd; echo DONE", namespace="research", priority_class="batch")])
        assert response.status_code == 200, response.text
    for each in (name, twin):
        wait_until(lambda each=each: job_state(server, f"research/{each}") in ("Succeeded", "Failed"))
        assert job_state(server, f"research/{each}") == "Succeeded", server.log
    folders = {server.cli("logs", each, "-n", "research").stdout.split("\n")[1] for each in (name, twin)}
    assert len(folders) == 2 and all(len(Path(f).name) < 255 for f in folders)
    assert "Traceback" not in server.log


def test_a_job_does_not_run_as_another_user_given_its_owners_uid(
    tmp_path: Path, start_server: Callable[..., Server], unix_user: Callable[[str], pwd.struct_passwd]
) -> None:
    server = two_teams(tmp_path, start_server)
    carol = unix_user("carol")
    mapped = server.cli("token", "create", "carol", "-n", "research", "--unix-user", carol.pw_name)
    assert mapped.returncode == 0, mapped.stderr
    token = mapped.stdout.strip()
    assert server.cli("stop", "clusterqueue", "research").returncode == 0
    marker = server.shared / "ran-as"
    submitted = job("carols", f"id -un > {marker}", namespace="research")
    assert server.apply([submitted], token=token).status_code == 200
    stored = server.api("GET", "/api/v1/objects/Job/research/carols")["metadata"]["annotations"]
    assert (
        stored[RUN_AS_UID_ANNOTATION] == str(carol.pw_uid) and stored[RUN_AS_USER_ANNOTATION] == carol.pw_name
    )

    # carol leaves; her uid goes to a newcomer before her job is admitted.
    subprocess.run(["userdel", carol.pw_name], check=True, capture_output=True)
    newcomer = carol.pw_name.replace("carol", "dave")
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--uid", str(carol.pw_uid), "--user-group", newcomer],
        check=True,
        capture_output=True,
    )
    os.chmod(server.shared, 0o777)  # so that the job could write its marker if it ran
    assert server.cli("resume", "clusterqueue", "research").returncode == 0
    wait_until(lambda: job_state(server, "research/carols") == "Failed")
    failed = _failure(server, "research/carols")
    assert failed["reason"] == "OwnerChanged"
    assert f"owner was {carol.pw_name} (uid {carol.pw_uid})" in failed["message"]
    assert f"is now {newcomer}" in failed["message"]
    assert not marker.exists()
    described = server.cli("describe", "workload", "carols", "-n", "research").stdout
    assert "OwnerChanged" in described
