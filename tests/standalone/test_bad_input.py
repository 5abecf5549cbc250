"""Bad input gets a clear message (file#doc Kind/name path: message), never a traceback or an endless wait."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from .helpers import Server, cluster_queue, flavor_and_queue, job, jobset, write_config


def _server(tmp_path: Path, start_server: Callable[..., Server]) -> Server:
    queues = cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    return start_server(write_config(tmp_path, queues))


def test_malformed_yaml_and_schema_errors(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = _server(tmp_path, start_server)
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Job\nmetadata: {name: x\n")
    result = server.cli("apply", "-f", str(broken))
    assert result.returncode == 1
    assert f"{broken}: line" in result.stderr and "not valid YAML" in result.stderr
    assert "Traceback" not in result.stderr

    wrong = tmp_path / "wrong.yaml"
    good = job("good", "true")
    bad = job("bad", "true")
    bad["spec"]["parallelism"] = "two"
    wrong.write_text(yaml.safe_dump_all([good, bad]))
    result = server.cli("apply", "-f", str(wrong))
    assert result.returncode == 1
    assert f"{wrong}#2 Job/default/bad spec.parallelism:" in result.stderr
    assert server.jobs() == {}, "nothing of a refused apply is stored"

    unknown_kind = server.apply("apiVersion: v1\nkind: Banana\nmetadata: {name: b}\n")
    assert unknown_kind.status_code == 422
    assert "Banana" in unknown_kind.json()["problems"][0]

    missing = server.cli("delete", "job", "nope")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_unknown_queue_is_refused_with_the_queues_that_exist(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = _server(tmp_path, start_server)
    result = server.cli("submit", "--queue", "nope", "--", "true")
    assert result.returncode == 1
    assert "LocalQueue default/nope does not exist (queues in default: main)" in result.stderr
    no_label = job("unlabelled", "true")
    del no_label["metadata"]["labels"]
    response = server.apply([no_label])
    assert response.status_code == 422
    assert "name the LocalQueue to submit to (queues in default: main)" in response.json()["problems"][0]


def test_a_request_that_can_never_fit_says_so(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = _server(tmp_path, start_server)
    result = server.cli("submit", "--queue", "main", "--name", "huge", "--cpu", "64", "--", "true")
    assert result.returncode == 0, result.stderr
    assert "can never fit as requested" in result.stdout
    assert "can never be admitted" in result.stderr
    described = server.cli("describe", "workload", "huge")
    assert "State:     Pending" in described.stdout
    assert "[capacity] can never fit as requested" in described.stdout
    assert "Position:  pending: position 1 of 1 in ClusterQueue main" in described.stdout


def test_typos_inside_a_job_are_refused_with_their_paths(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = _server(tmp_path, start_server)
    typo = job("typo", "true")
    typo["spec"]["backofLimit"] = 0
    typo["spec"]["template"]["spec"]["containers"][0]["comand"] = typo["spec"]["template"]["spec"][
        "containers"
    ][0].pop("command")
    ddp = jobset("ddp", [("workers", 1, 1, "true", 0)])
    ddp["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelizm"] = 2
    path = tmp_path / "typos.yaml"
    path.write_text(yaml.safe_dump_all([typo, ddp]))
    result = server.cli("apply", "-f", str(path))
    assert result.returncode == 1
    for line in (
        f"{path}#1 Job/default/typo spec.backofLimit: unknown field (did you mean backoffLimit?)",
        f"{path}#1 Job/default/typo spec.template.spec.containers[0].comand: unknown field "
        "(did you mean command?)",
        f"{path}#2 JobSet/default/ddp spec.replicatedJobs[0].template.spec.parallelizm: unknown field "
        "(did you mean parallelism?)",
    ):
        assert line in result.stderr, result.stderr
    assert server.jobs() == {}, "nothing of a refused apply is stored"
