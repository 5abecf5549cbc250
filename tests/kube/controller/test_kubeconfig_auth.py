"""Kubeconfigs as kubectl reads them, against the real API server: an exec plugin, $KUBECONFIG's
files merged, a chosen context, tls-server-name. (Parsing alone: tests/store/test_kubeconfig.py.)

The exec plugin is a real script: it answers the tokens it is given in turn, the API server's
static admin token among them, and writes down each run, so the test counts how often pykueue
asked it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import secrets
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pykueue.cli import controller_command
from pykueue.errors import StoreError, Unavailable
from pykueue.store import kubeconfig, kubernetes

from ..controlplane import KubeCluster

T = TypeVar("T")

PLUGIN = """#!{python}
import json, os, pathlib
state = pathlib.Path({state!r})
runs = state / "runs"
done = runs.read_text().splitlines() if runs.exists() else []
runs.write_text("run\\n" * (len(done) + 1))
tokens = (state / "tokens").read_text().split()
answer = {{"token": tokens[min(len(done), len(tokens) - 1)]}} if tokens else {{}}
if (state / "tls.crt").exists():
    answer["clientCertificateData"] = (state / "tls.crt").read_text()
    answer["clientKeyData"] = (state / "tls.key").read_text()
if (state / "expiry").exists():
    answer["expirationTimestamp"] = (state / "expiry").read_text().strip()
api = json.loads(os.environ["KUBERNETES_EXEC_INFO"])["apiVersion"]
print(json.dumps({{"apiVersion": api, "kind": "ExecCredential", "status": answer}}))
"""


def _plugin(folder: Path, tokens: list[str], expiry: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokens").write_text(" ".join(tokens))
    if expiry:
        (folder / "expiry").write_text(expiry)
    script = folder / "plugin.py"
    script.write_text(PLUGIN.format(python=sys.executable, state=str(folder)))
    script.chmod(0o755)
    return script


def _runs(folder: Path) -> int:
    runs = folder / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _admin_kubeconfig(cluster: KubeCluster) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cluster.kubeconfig.read_text())
    return doc


def _with_user(cluster: KubeCluster, user: dict[str, Any], path: Path, **extra: Any) -> Path:
    doc = _admin_kubeconfig(cluster)
    doc["users"] = [{"name": "pykueue-admin", "user": user}]
    doc["clusters"][0]["cluster"].update(extra)
    path.write_text(json.dumps(doc))
    return path


def _run(config: kubeconfig.KubeConfig, body: Callable[[kubernetes.KubernetesStore], Awaitable[T]]) -> T:
    async def go() -> T:
        store = kubernetes.KubernetesStore(config, retry=kubernetes.Retry(attempts=1))
        async with store:
            return await asyncio.wait_for(body(store), timeout=60)

    return asyncio.run(go())


async def _who(store: kubernetes.KubernetesStore, times: int = 1) -> str:
    """The user the API server took the caller for (a SelfSubjectReview), asked ``times`` times."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    name = ""
    for _ in range(times):
        answer = await store.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        name = str(answer["status"]["userInfo"]["username"])
    return name


def test_an_exec_plugins_token_is_kept_and_asked_for_again_after_a_401(
    kube_apiserver: KubeCluster, tmp_path: Path
) -> None:
    folder = tmp_path / "plugin"
    # The first answer is a token the API server refuses (as an expired one would be).
    script = _plugin(folder, ["not-a-token-of-this-cluster", kube_apiserver.token])
    exec_section = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(script),
        "interactiveMode": "Never",
    }
    config = kubeconfig.load_kubeconfig(_with_user(kube_apiserver, {"exec": exec_section}, tmp_path / "kc"))
    assert _run(config, lambda store: _who(store, 5)) == "pykueue-admin"
    assert _runs(folder) == 2  # the refused token, then the good one, kept for the other four requests

    # A list, a watch and writes on the same credential: no more runs.
    name = f"kubeconfig-{secrets.token_hex(4)}"

    async def watch_a_namespace_appear(store: kubernetes.KubernetesStore) -> str:
        _, version = await store.list("Namespace")
        events = store.watch("Namespace", version)
        await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        try:
            async for event in events:
                if event.object["metadata"]["name"] == name:
                    return event.type
            return ""
        finally:
            await events.aclose()  # type: ignore[attr-defined]
            await store.delete("Namespace", "", name)

    assert _run(config, watch_a_namespace_appear) == "ADDED"
    assert _runs(folder) == 2


def test_an_exec_plugins_expired_token_is_asked_for_again(
    kube_apiserver: KubeCluster, tmp_path: Path
) -> None:
    folder = tmp_path / "plugin"
    script = _plugin(folder, [kube_apiserver.token], expiry="2020-01-01T00:00:00Z")
    exec_section = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": str(script),
    }
    config = kubeconfig.load_kubeconfig(_with_user(kube_apiserver, {"exec": exec_section}, tmp_path / "kc"))
    assert _run(config, lambda store: _who(store, 3)) == "pykueue-admin"
    assert _runs(folder) == 3

    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    (folder / "expiry").write_text(later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    config = kubeconfig.load_kubeconfig(_with_user(kube_apiserver, {"exec": exec_section}, tmp_path / "kc"))
    assert _run(config, lambda store: _who(store, 3)) == "pykueue-admin"
    assert _runs(folder) == 4


def test_an_exec_plugins_client_certificate_is_presented(kube_apiserver: KubeCluster, tmp_path: Path) -> None:
    folder = tmp_path / "plugin"
    script = _plugin(folder, [])
    assert kube_apiserver.creds is not None
    (folder / "tls.crt").write_bytes(kube_apiserver.creds.admin_cert.read_bytes())
    (folder / "tls.key").write_bytes(kube_apiserver.creds.admin_key.read_bytes())
    exec_section = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(script),
        "interactiveMode": "Never",
    }
    config = kubeconfig.load_kubeconfig(_with_user(kube_apiserver, {"exec": exec_section}, tmp_path / "kc"))
    assert _run(config, lambda store: _who(store, 2)) == "pykueue-admin"
    assert _runs(folder) == 1


def test_kubeconfig_env_files_are_merged_and_a_context_chosen(
    kube_apiserver: KubeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second file names the first file's cluster and adds a token user; its current-context
    # loses to the first file's.
    token_file = tmp_path / "b" / "token"
    token_file.parent.mkdir()
    token_file.write_text(kube_apiserver.token)
    second = tmp_path / "b" / "config"
    second.write_text(
        json.dumps(
            {
                "clusters": [{"name": "pykueue-test", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "by-token", "user": {"tokenFile": "token"}}],
                "contexts": [
                    {"name": "by-token", "context": {"cluster": "pykueue-test", "user": "by-token"}}
                ],
                "current-context": "by-token",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", f"{kube_apiserver.kubeconfig}:{second}")
    current = kubeconfig.load_kubeconfig()
    assert current.cert_data is not None and current.server == kube_apiserver.server
    # What the controller, the dashboard and the policy commands connect with, given --context only.
    store = controller_command.connect(None, "by-token")
    assert store.config.server == kube_apiserver.server  # the first file's cluster of that name
    assert store.config.cert_data is None and store.config.token_file == str(token_file)
    assert _run(store.config, _who) == "pykueue-admin"


def test_tls_server_name_is_the_name_the_certificate_is_checked_for(
    kube_apiserver: KubeCluster, tmp_path: Path
) -> None:
    user = {"token": kube_apiserver.token}
    right = kubeconfig.load_kubeconfig(
        _with_user(kube_apiserver, user, tmp_path / "right", **{"tls-server-name": "kubernetes.default.svc"})
    )
    assert right.tls_server_name == "kubernetes.default.svc"
    assert _run(right, _who) == "pykueue-admin"
    wrong = kubeconfig.load_kubeconfig(
        _with_user(
            kube_apiserver, user, tmp_path / "wrong", **{"tls-server-name": "not-the-apiserver.example"}
        )
    )
    with pytest.raises(Unavailable, match=r"not-the-apiserver\.example"):
        _run(wrong, _who)


def test_a_missing_exec_plugin_is_an_error_naming_the_user(
    kube_apiserver: KubeCluster, tmp_path: Path
) -> None:
    exec_section = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "gke-gcloud-auth-plugin-not-installed",
        "interactiveMode": "IfAvailable",
        "installHint": "Install gke-gcloud-auth-plugin for use with kubectl",
    }
    config = kubeconfig.load_kubeconfig(_with_user(kube_apiserver, {"exec": exec_section}, tmp_path / "kc"))
    with pytest.raises(StoreError, match=r"users\[pykueue-admin\]\.user\.exec\.command .*Install gke"):
        _run(config, _who)
