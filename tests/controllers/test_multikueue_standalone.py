"""A standalone manager's worker files: what is accepted, and refusals that name the field."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pykueue.errors import InputError
from pykueue.multikueue.clusters import BadConfig
from pykueue.multikueue.standalone_workers import WorkerAddress, load_worker_file, worker_file
from pykueue.standalone.runtime import Config


def _cluster(kube_config: dict[str, Any] | None) -> dict[str, Any]:
    source = {"kubeConfig": kube_config} if kube_config is not None else {}
    return {"metadata": {"name": "gpu1"}, "spec": {"clusterSource": source}}


def test_the_cluster_names_its_worker_file_by_path() -> None:
    path = worker_file(_cluster({"locationType": "Path", "location": "/etc/pykueue/gpu1.yaml"}))
    assert path == Path("/etc/pykueue/gpu1.yaml")


@pytest.mark.parametrize(
    ("kube_config", "words"),
    [
        (
            {"locationType": "Secret", "location": "gpu1"},
            "spec.clusterSource.kubeConfig.locationType must be Path",
        ),
        ({"location": "gpu1"}, "(got Secret)"),  # upstream's default location type
        (None, "spec.clusterSource.kubeConfig is required"),
    ],
)
def test_a_cluster_without_a_worker_file_is_refused_with_the_field(
    kube_config: dict[str, Any] | None, words: str
) -> None:
    with pytest.raises(BadConfig) as refused:
        worker_file(_cluster(kube_config))
    assert "MultiKueueCluster gpu1" in str(refused.value) and words in str(refused.value)


def test_a_worker_file_gives_server_and_token_inline_or_from_a_file(tmp_path: Path) -> None:
    inline = tmp_path / "inline.yaml"
    inline.write_text("server: http://gpu1.lab:8642/\ntoken: pk_abc\n")
    assert load_worker_file(inline, "gpu1") == WorkerAddress("http://gpu1.lab:8642", "pk_abc")
    (tmp_path / "gpu2.token").write_text("pk_def\n")
    by_file = tmp_path / "by-file.yaml"
    by_file.write_text("server: https://gpu2.lab\ntokenFile: gpu2.token\n")
    assert load_worker_file(by_file, "gpu2") == WorkerAddress("https://gpu2.lab", "pk_def")


def test_a_workers_own_client_config_is_a_worker_file(tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    path.write_text(json.dumps({"server": "http://127.0.0.1:8642", "token": "pk_x", "socket": "/run/x.sock"}))
    assert load_worker_file(path, "gpu1") == WorkerAddress("http://127.0.0.1:8642", "pk_x")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("server: http://a:1\n", "exactly one of token and tokenFile"),
        ("server: http://a:1\ntoken: t\ntokenFile: f\n", "exactly one of token and tokenFile"),
        ("server: gpu1:8642\ntoken: t\n", "server must be an http:// or https:// URL"),
        ("server: http://a:1\ntoken: t\ntls: true\n", "unknown keys tls"),
        ("- a list\n", "must be a mapping"),
        ("server: http://a:1\ntokenFile: absent.token\n", "tokenFile"),
    ],
)
def test_a_bad_worker_file_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "gpu1.yaml"
    path.write_text(text)
    with pytest.raises(BadConfig) as refused:
        load_worker_file(path, "gpu1")
    assert f"MultiKueueCluster gpu1: worker file {path}" in str(refused.value)
    assert words in str(refused.value)


def test_a_missing_worker_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(BadConfig, match="cannot read it"):
        load_worker_file(tmp_path / "absent.yaml", "gpu1")


def test_the_servers_multikueue_section_takes_upstreams_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("multiKueue: {workerLostTimeout: 90s, origin: lab}\n")
    settings = Config.load(path).multikueue
    assert (settings.worker_lost_timeout, settings.origin) == (timedelta(seconds=90), "lab")
    assert Config.load(None).multikueue.worker_lost_timeout == timedelta(minutes=15)
    path.write_text("multiKueue: {workerLostTimeout: soon}\n")
    with pytest.raises(InputError, match=r"multiKueue\.workerLostTimeout"):
        Config.load(path)
    path.write_text("multiKueue: {workers: [gpu1]}\n")
    with pytest.raises(InputError, match=r"multiKueue\.workers"):
        Config.load(path)
