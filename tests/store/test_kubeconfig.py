"""`pykueue.store.kubeconfig`: kubeconfigs read as kubectl reads them.

Files merged from $KUBECONFIG, contexts, and the credentials that change while a program runs:
an exec plugin (a real script, run as a child process) against the scripted API server of
tests/store/scripted_server.py, which accepts one token only. The same against a real API
server: tests/kube/controller/test_kubeconfig_auth.py.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web

from pykueue.multikueue import clusters as multikueue_clusters
from pykueue.store import kubeconfig, kubernetes

from .scripted_server import serving, status

T = TypeVar("T")
GOOD = "good-token"

PLUGIN = """#!{python}
import json, os, pathlib
state = pathlib.Path({state!r})
runs = state / "runs"
done = runs.read_text().splitlines() if runs.exists() else []
runs.write_text("".join(line + "\\n" for line in [*done, os.environ.get("PLUGIN_GREETING", "")]))
(state / "exec-info").write_text(os.environ["KUBERNETES_EXEC_INFO"])
tokens = (state / "tokens").read_text().split()
answer = {{"token": tokens[min(len(done), len(tokens) - 1)]}}
if (state / "expiry").exists():
    answer["expirationTimestamp"] = (state / "expiry").read_text().strip()
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": answer}}))
"""


class Plugin:
    """An exec plugin script in ``folder``: it answers the tokens given, in turn (the last one
    again and again), and writes down each run."""

    def __init__(self, folder: Path, tokens: list[str], expiry: datetime.datetime | None = None) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tokens").write_text(" ".join(tokens))
        if expiry is not None:
            (folder / "expiry").write_text(expiry.strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.path = folder / "plugin.py"
        self.path.write_text(PLUGIN.format(python=sys.executable, state=str(folder)))
        self.path.chmod(0o755)

    @property
    def runs(self) -> list[str]:
        runs = self.folder / "runs"
        return runs.read_text().splitlines() if runs.exists() else []

    def exec_section(self, **extra: Any) -> dict[str, Any]:
        return {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(self.path),
            "interactiveMode": "Never",
            "env": [{"name": "PLUGIN_GREETING", "value": "hello"}],
            **extra,
        }


def _doc(server: str, user: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _only_good_token(seen: list[str]) -> Callable[[web.Request], web.Response]:
    def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != f"Bearer {GOOD}":
            return status(401, "Unauthorized")
        return web.json_response({"metadata": {"name": "n", "resourceVersion": "1"}})

    return handler


def _against(
    handler: Callable[[web.Request], web.Response],
    doc_of: Callable[[str], kubeconfig.KubeConfig],
    use: Callable[[kubernetes.KubernetesStore], Awaitable[T]],
) -> T:
    async def scenario() -> T:
        async with serving(handler) as url, kubernetes.KubernetesStore(doc_of(url)) as store:
            return await use(store)

    return asyncio.run(asyncio.wait_for(scenario(), 30))


async def _get_namespace(store: kubernetes.KubernetesStore, times: int = 1) -> None:
    for _ in range(times):
        await store.get("Namespace", "", "n")


# ------------------------------------------------------------------ files and contexts


def test_kubeconfig_env_merges_files_the_first_definition_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _write(
        tmp_path / "a" / "config",
        {
            "clusters": [{"name": "shared", "cluster": {"server": "https://first:6443"}}],
            "users": [{"name": "alice", "user": {"token": "alice-token"}}],
            "contexts": [{"name": "a", "context": {"cluster": "shared", "user": "alice"}}],
            "current-context": "a",
        },
    )
    (tmp_path / "b" / "bob.token").parent.mkdir(parents=True)
    (tmp_path / "b" / "bob.token").write_text("bob-token\n")
    second = _write(
        tmp_path / "b" / "config",
        {
            "clusters": [
                {"name": "shared", "cluster": {"server": "https://second:6443"}},
                {"name": "own", "cluster": {"server": "https://own:6443", "tls-server-name": "api.own"}},
            ],
            # Relative paths start from the file they are written in.
            "users": [{"name": "bob", "user": {"tokenFile": "bob.token"}}],
            "contexts": [
                {"name": "b", "context": {"cluster": "shared", "user": "bob"}},
                {"name": "own", "context": {"cluster": "own", "user": "bob"}},
            ],
            "current-context": "b",
        },
    )
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", f"{missing}:{first}:{second}")
    current = kubeconfig.load_kubeconfig()
    assert (current.server, current.bearer_token()) == ("https://first:6443", "alice-token")
    # Context b is the second file's, its cluster name the first file's.
    chosen = kubeconfig.load_kubeconfig(context="b")
    assert (chosen.server, chosen.bearer_token()) == ("https://first:6443", "bob-token")
    own = kubeconfig.load_kubeconfig(context="own")
    assert (own.server, own.tls_server_name) == ("https://own:6443", "api.own")
    with pytest.raises(kubeconfig.KubeconfigError, match="no context named 'nope'"):
        kubeconfig.load_kubeconfig(context="nope")
    # The order decides: the second file first makes its current context the current one.
    monkeypatch.setenv("KUBECONFIG", f"{second}:{first}")
    assert kubeconfig.load_kubeconfig().server == "https://second:6443"


def test_without_kubeconfig_env_the_home_config_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(kubeconfig.KubeconfigError, match=r"\$KUBECONFIG is not set and .*\.kube/config"):
        kubeconfig.load_kubeconfig()
    _write(tmp_path / ".kube" / "config", _doc("https://home:6443", {"token": "t"}))
    assert kubeconfig.load_kubeconfig().server == "https://home:6443"


def test_default_config_follows_controller_runtimes_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _write(tmp_path / ".kube" / "config", _doc("https://home:6443", {"token": "t"}))
    env_file = _write(tmp_path / "env-config", _doc("https://env:6443", {"token": "t"}))
    flag_file = _write(tmp_path / "flag-config", _doc("https://flag:6443", {"token": "t"}))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(env_file))
    assert kubeconfig.default_config(flag_file, None).server == "https://flag:6443"
    assert kubeconfig.default_config(None, None).server == "https://env:6443"
    monkeypatch.delenv("KUBECONFIG")
    assert kubeconfig.default_config(None, None).server == "https://10.0.0.1:443"
    # Only a kubeconfig has contexts.
    assert kubeconfig.default_config(None, "x").server == "https://home:6443"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert kubeconfig.default_config(None, None).server == "https://home:6443"


def test_proxy_url_and_tls_server_name_are_read_and_socks_is_refused(tmp_path: Path) -> None:
    doc = _doc("https://api:6443", {"token": "t"}, **{"proxy-url": "http://proxy:3128"})
    doc["clusters"][0]["cluster"]["tls-server-name"] = "kubernetes"
    config = kubeconfig.load_kubeconfig(_write(tmp_path / "config", doc))
    assert (config.proxy_url, config.tls_server_name) == ("http://proxy:3128", "kubernetes")
    doc["clusters"][0]["cluster"]["proxy-url"] = "socks5://proxy:1080"
    with pytest.raises(kubeconfig.KubeconfigError, match=r"clusters\[c\]\.cluster\.proxy-url: only http"):
        kubeconfig.load_kubeconfig(_write(tmp_path / "config", doc))


def test_credentials_pykueue_cannot_send_are_errors_naming_the_field(tmp_path: Path) -> None:
    cases = {
        r"users\[u\]\.user\.username: basic authentication": {"username": "a", "password": "b"},
        r"users\[u\]\.user\.as: impersonation": {"token": "t", "as": "someone"},
        r"users\[u\]\.user\.auth-provider\.name: gcp; only the oidc": {"auth-provider": {"name": "gcp"}},
        r"users\[u\]\.user\.auth-provider\.config\.id-token is not set": {
            "auth-provider": {"name": "oidc", "config": {"idp-issuer-url": "https://idp"}}
        },
        r"users\[u\]\.user\.exec\.apiVersion: client\.authentication\.k8s\.io/v1alpha1": {
            "exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}
        },
        r"users\[u\]\.user\.exec\.interactiveMode is required": {
            "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}
        },
    }
    for message, user in cases.items():
        with pytest.raises(kubeconfig.KubeconfigError, match=message):
            kubeconfig.load_kubeconfig(_write(tmp_path / "config", _doc("https://api:6443", user)))


def test_a_secret_kubeconfig_may_not_run_a_command(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin", [GOOD])
    encoded = base64.b64encode(json.dumps(_doc("https://w1:6443", {"exec": plugin.exec_section()})).encode())
    secret = {
        "metadata": {"name": "w1", "namespace": "kueue-system"},
        "data": {"kubeconfig": encoded.decode()},
    }
    with pytest.raises(
        multikueue_clusters.BadConfig, match=r"users\[u\]\.user\.exec: a kubeconfig from a Secret"
    ):
        multikueue_clusters.kubeconfig_from_secret(secret)


# ------------------------------------------------------------------ exec plugins


def test_an_exec_plugins_token_is_kept_until_refused_then_asked_for_again(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path / "plugin", ["stale-token", GOOD])
    config = _write(
        tmp_path / "config",
        _doc("SERVER", {"exec": plugin.exec_section(provideClusterInfo=True)}),
    )
    seen: list[str] = []

    def load(url: str) -> kubeconfig.KubeConfig:
        config.write_text(config.read_text().replace("SERVER", url))
        return kubeconfig.load_kubeconfig(config)

    _against(_only_good_token(seen), load, lambda store: _get_namespace(store, 5))
    # The first answer was refused once, the request sent again with the second; then kept.
    assert seen == ["Bearer stale-token", *[f"Bearer {GOOD}"] * 5]
    assert plugin.runs == ["hello", "hello"]
    info = json.loads((plugin.folder / "exec-info").read_text())
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"].startswith("http://127.0.0.1:")


def test_an_exec_plugins_expired_token_is_asked_for_again(tmp_path: Path) -> None:
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    plugin = Plugin(tmp_path / "plugin", [GOOD], expiry=past)
    seen: list[str] = []

    def load(url: str) -> kubeconfig.KubeConfig:
        return kubeconfig.load_kubeconfig(
            _write(tmp_path / "config", _doc(url, {"exec": plugin.exec_section()}))
        )

    _against(_only_good_token(seen), load, lambda store: _get_namespace(store, 3))
    assert len(plugin.runs) == 3
    assert seen == [f"Bearer {GOOD}"] * 3


def test_a_failing_exec_plugin_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "pykueue-no-such-plugin",
        "installHint": "install it from example.com",
    }
    config = kubeconfig.load_kubeconfig(
        _write(tmp_path / "config", _doc("https://api:6443", {"exec": missing}))
    )
    assert config.auth is not None
    with pytest.raises(
        kubeconfig.KubeconfigError, match=r"exec\.command pykueue-no-such-plugin: .*install it from"
    ):
        asyncio.run(config.auth.credential())
    failing = tmp_path / "failing.sh"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    config = kubeconfig.load_kubeconfig(
        _write(
            tmp_path / "config", _doc("https://api:6443", {"exec": {**missing, "command": "./failing.sh"}})
        )
    )
    assert config.auth is not None
    with pytest.raises(kubeconfig.KubeconfigError, match=r"failing\.sh exited with status 3"):
        asyncio.run(config.auth.credential())


# ------------------------------------------------------------------ OIDC


def _jwt(expires: datetime.datetime) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': int(expires.timestamp()), 'sub': 'me'})}.c2ln"


def test_an_oidc_id_token_is_sent_until_it_expires(tmp_path: Path) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    token = _jwt(later)
    provider = {"auth-provider": {"name": "oidc", "config": {"id-token": token, "refresh-token": "r"}}}
    config = kubeconfig.load_kubeconfig(_write(tmp_path / "config", _doc("https://api:6443", provider)))
    assert config.auth is not None
    assert asyncio.run(config.auth.credential()).token == token
    provider["auth-provider"]["config"]["id-token"] = _jwt(datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    config = kubeconfig.load_kubeconfig(_write(tmp_path / "config", _doc("https://api:6443", provider)))
    assert config.auth is not None
    with pytest.raises(
        kubeconfig.KubeconfigError, match=r"users\[u\]\.user\.auth-provider\.config\.id-token expired at 2020"
    ):
        asyncio.run(config.auth.credential())


def test_requests_go_through_the_proxy_url(tmp_path: Path) -> None:
    """The API server's name does not resolve: only the proxy (the scripted server) can answer."""
    hosts: list[str] = []

    def proxy(request: web.Request) -> web.Response:
        hosts.append(request.headers.get("Host", ""))
        return web.json_response({"metadata": {"name": "n", "resourceVersion": "1"}})

    def load(url: str) -> kubeconfig.KubeConfig:
        doc = _doc("http://api.pykueue-test.invalid:6443", {"token": GOOD}, **{"proxy-url": url})
        return kubeconfig.load_kubeconfig(_write(tmp_path / "config", doc))

    _against(proxy, load, _get_namespace)
    assert hosts == ["api.pykueue-test.invalid:6443"]
