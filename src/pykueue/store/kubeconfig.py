"""Kubeconfigs, read as kubectl reads them; the one reader of every pykueue command and controller.

    which files     an explicit path alone; else every file of $KUBECONFIG (``os.pathsep``-separated,
                    missing ones skipped) merged; else ~/.kube/config
    merging         per name, the first file that defines a cluster, user or context wins; the
                    first file that sets current-context wins; relative paths are relative to the
                    file they are written in
    which context   the one named (``--context``), else current-context
    cluster         server, certificate-authority(-data), insecure-skip-tls-verify,
                    tls-server-name, proxy-url (http/https proxies)
    user            client-certificate(-data) + client-key(-data), token, tokenFile,
                    exec (client.authentication.k8s.io/v1 and v1beta1), auth-provider oidc (its id-token)

Credentials that change while a program runs sit behind an `Authenticator`: an exec plugin's
answer is kept until its expirationTimestamp (for ever without one) and asked for again when
the API server answers 401 to it, as client-go does. An OIDC id-token is sent as it is; pykueue
does not refresh it with the refresh-token (kubectl would write the new token back into the file,
which a controller should not do), so an expired one is an error naming the field.

A kubeconfig read from a Secret (a MultiKueue worker's) may name no files and run no commands:
whoever can write that Secret could otherwise make the controller read its files or run a program.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime
import os
import ssl
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from pykueue.errors import StoreError

KUBECONFIG_ENV = "KUBECONFIG"
DEFAULT_PATH = Path("~/.kube/config")
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# Where a cluster's extension for exec plugins sits (passed on with provideClusterInfo).
EXEC_EXTENSION = "client.authentication.k8s.io/exec"


class KubeconfigError(StoreError):
    """A kubeconfig cannot be read or used; the message names the file and the field."""


# ------------------------------------------------------------------ what a request carries


@dataclass(frozen=True, slots=True)
class Credential:
    """What one request authenticates with: a bearer token and/or a client certificate (PEM)."""

    token: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None

    @property
    def client_cert(self) -> tuple[bytes, bytes] | None:
        if self.cert_data is not None and self.key_data is not None:
            return self.cert_data, self.key_data
        return None


class Authenticator(Protocol):
    """Credentials that may change while a program runs (exec plugins, OIDC)."""

    async def credential(self) -> Credential: ...

    def rejected(self, used: Credential) -> bool:
        """The API server answered 401 to ``used``: forget it; True when asking again may help."""
        ...


@dataclass(frozen=True, slots=True)
class KubeConfig:
    """How to reach and authenticate to one API server."""

    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_data: bytes | None = None  # PEM client certificate
    key_data: bytes | None = None  # PEM client key
    token: str | None = None
    token_file: str | None = None  # re-read on every connection (projected tokens rotate)
    insecure: bool = False
    tls_server_name: str | None = None  # the name the server's certificate is checked for
    proxy_url: str | None = None
    # Exec plugin or OIDC; its credential goes with (and before) the static ones above.
    auth: Authenticator | None = field(default=None, compare=False)

    def ssl_context(self, client_cert: tuple[bytes, bytes] | None = None) -> ssl.SSLContext:
        """The TLS settings; ``client_cert`` (an authenticator's) stands in for the static one."""
        if self.insecure:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            ctx = ssl.create_default_context(cadata=self.ca_data.decode())
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        pair = client_cert or (
            (self.cert_data, self.key_data)
            if self.cert_data is not None and self.key_data is not None
            else None
        )
        if pair is not None:
            # ssl only loads a chain from files: write them to a private folder for the call.
            with tempfile.TemporaryDirectory(prefix="pykueue-cert-") as folder:
                cert, key = Path(folder, "tls.crt"), Path(folder, "tls.key")
                cert.write_bytes(pair[0])
                key.touch(mode=0o600)
                key.write_bytes(pair[1])
                ctx.load_cert_chain(str(cert), str(key))
        return ctx

    def bearer_token(self) -> str | None:
        if self.token_file:
            return Path(self.token_file).read_text().strip()
        return self.token


# ------------------------------------------------------------------ finding and merging files


def load_kubeconfig(path: str | Path | None = None, context: str | None = None) -> KubeConfig:
    """One context of a kubeconfig: of the file ``path``, or of $KUBECONFIG's files merged, or of
    ~/.kube/config (the current context unless ``context`` names one)."""
    if path is not None:
        files = [Path(path).expanduser()]
        if not files[0].is_file():
            raise KubeconfigError(f"kubeconfig {files[0]}: no such file")
    else:
        files = kubeconfig_files()
    return select(merge([(str(file), file.parent, _read(file)) for file in files]), context)


def kubeconfig_files() -> list[Path]:
    """The files kubectl would read: $KUBECONFIG's that exist, or ~/.kube/config."""
    listed = os.environ.get(KUBECONFIG_ENV, "")
    if listed:
        seen: list[Path] = []
        for entry in listed.split(os.pathsep):
            file = Path(entry).expanduser()
            if entry and file not in seen and file.is_file():
                seen.append(file)
        if not seen:
            raise KubeconfigError(f"${KUBECONFIG_ENV}={listed}: none of its files exists")
        return seen
    default = DEFAULT_PATH.expanduser()
    if not default.is_file():
        raise KubeconfigError(f"no kubeconfig: ${KUBECONFIG_ENV} is not set and {default} does not exist")
    return [default]


def _read(file: Path) -> Mapping[str, Any]:
    try:
        doc = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"kubeconfig {file}: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"kubeconfig {file}: not a kubeconfig document")
    return doc


@dataclass(frozen=True, slots=True)
class Entry:
    """A named cluster, user or context, and the file (folder) its relative paths start from."""

    source: str
    name: str
    body: Mapping[str, Any]
    base: Path | None  # None: no files allowed (a kubeconfig from a Secret)


@dataclass(frozen=True, slots=True)
class Merged:
    clusters: Mapping[str, Entry]
    users: Mapping[str, Entry]
    contexts: Mapping[str, Entry]
    current_context: str
    sources: str


def merge(docs: Sequence[tuple[str, Path | None, Mapping[str, Any]]]) -> Merged:
    """kubectl's merge of (source, folder, document)s: the first definition of a name wins,
    the first current-context wins. A folder None allows no files (a Secret's kubeconfig)."""
    sections: dict[str, dict[str, Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current = ""
    for file, base, doc in docs:
        for section, found in sections.items():
            items = doc.get(section) or []
            if not isinstance(items, list):
                raise KubeconfigError(f"{file}: {section}: not a list")
            for item in items:
                if not isinstance(item, Mapping) or not item.get("name"):
                    raise KubeconfigError(f"{file}: {section}: an entry without a name")
                body = item.get(section[:-1]) or {}
                if not isinstance(body, Mapping):
                    raise KubeconfigError(f"{file}: {section}[{item['name']}].{section[:-1]}: not a mapping")
                name = str(item["name"])
                found.setdefault(name, Entry(file, name, body, base))
        current = current or str(doc.get("current-context") or "")
    return Merged(
        sections["clusters"],
        sections["users"],
        sections["contexts"],
        current,
        ", ".join(dict.fromkeys(file for file, _, _ in docs)),
    )


def parse_kubeconfig(
    doc: Mapping[str, Any], source: str, base: Path | None, context: str | None = None
) -> KubeConfig:
    """One context of one kubeconfig document; ``base`` None forbids references to files and
    commands (a kubeconfig read from a Secret must carry its credentials inline)."""
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"{source}: not a kubeconfig document")
    return select(merge([(source, base, doc)]), context)


# ------------------------------------------------------------------ one context


def select(merged: Merged, context: str | None) -> KubeConfig:
    """The KubeConfig of ``context`` (or the current context) of merged kubeconfigs."""
    name = context or merged.current_context
    if not name:
        raise KubeconfigError(f"{merged.sources}: current-context is not set; name a context (--context)")
    ctx = _named(merged.contexts, "context", name, merged.sources)
    cluster_name = str(ctx.body.get("cluster") or "")
    if not cluster_name:
        raise KubeconfigError(f"{ctx.source}: contexts[{name}].context.cluster is not set")
    cluster = _named(merged.clusters, "cluster", cluster_name, merged.sources)
    user_name = str(ctx.body.get("user") or "")
    user = _named(merged.users, "user", user_name, merged.sources) if user_name else None
    return _config(cluster, user)


def _named(entries: Mapping[str, Entry], what: str, name: str, sources: str) -> Entry:
    entry = entries.get(name)
    if entry is None:
        raise KubeconfigError(f"{sources}: no {what} named {name!r}")
    return entry


def _config(cluster: Entry, user: Entry | None) -> KubeConfig:
    c = cluster.body
    where = f"{cluster.source}: clusters[{cluster.name}].cluster"
    server = str(c.get("server") or "").rstrip("/")
    if not server:
        raise KubeconfigError(f"{where}.server is not set")
    proxy = str(c.get("proxy-url") or "") or None
    if proxy is not None and not proxy.startswith(("http://", "https://")):
        raise KubeconfigError(
            f"{where}.proxy-url: only http:// and https:// proxies are supported, not {proxy}"
        )
    ca_file = _path(cluster, "certificate-authority", where)
    creds: dict[str, Any] = {}
    auth: Authenticator | None = None
    if user is not None:
        creds, auth = _user(user, cluster)
    return KubeConfig(
        server=server,
        ca_file=str(ca_file) if ca_file else None,
        ca_data=_b64(c, "certificate-authority-data", where),
        insecure=bool(c.get("insecure-skip-tls-verify")),
        tls_server_name=str(c.get("tls-server-name") or "") or None,
        proxy_url=proxy,
        auth=auth,
        **creds,
    )


# Fields of a user that carry credentials pykueue does not send; quietly dropping them would
# connect as someone else.
_UNSUPPORTED_USER_FIELDS = {
    "username": "basic authentication (the API server has not accepted it since Kubernetes 1.19)",
    "password": "basic authentication (the API server has not accepted it since Kubernetes 1.19)",
    "as": "impersonation",
    "as-uid": "impersonation",
    "as-groups": "impersonation",
    "as-user-extra": "impersonation",
}


def _user(user: Entry, cluster: Entry) -> tuple[dict[str, Any], Authenticator | None]:
    u = user.body
    where = f"{user.source}: users[{user.name}].user"
    for key, what in _UNSUPPORTED_USER_FIELDS.items():
        if u.get(key):
            raise KubeconfigError(f"{where}.{key}: {what} is not supported")
    creds: dict[str, Any] = {
        "cert_data": _data_or_file(user, "client-certificate", where),
        "key_data": _data_or_file(user, "client-key", where),
        "token": str(u["token"]) if u.get("token") else None,
    }
    token_file = _path(user, "tokenFile", where)
    creds["token_file"] = str(token_file) if token_file else None
    auth: Authenticator | None = None
    if u.get("exec"):
        if user.base is None:
            raise KubeconfigError(f"{where}.exec: a kubeconfig from a Secret may not run commands")
        auth = ExecAuthenticator(exec_plugin(user, cluster))
    elif u.get("auth-provider"):
        auth = oidc_authenticator(u["auth-provider"], f"{where}.auth-provider")
    return creds, auth


def _path(entry: Entry, key: str, where: str) -> Path | None:
    value = entry.body.get(key)
    if not value:
        return None
    if entry.base is None:
        raise KubeconfigError(f"{where}.{key}: files are not allowed here")
    return entry.base / str(value)


def _b64(body: Mapping[str, Any], key: str, where: str) -> bytes | None:
    if not body.get(key):
        return None
    try:
        return base64.b64decode(str(body[key]), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigError(f"{where}.{key}: not base64 ({exc})") from None


def _data_or_file(entry: Entry, name: str, where: str) -> bytes | None:
    data = _b64(entry.body, f"{name}-data", where)
    if data is not None:
        return data
    file = _path(entry, name, where)
    if file is None:
        return None
    try:
        return file.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"{where}.{name}: {exc}") from None


def in_cluster_config() -> KubeConfig:
    """The pod's service account, as client-go's rest.InClusterConfig."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeconfigError("not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    if ":" in host:
        host = f"[{host}]"
    return KubeConfig(
        server=f"https://{host}:{port}",
        ca_file=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        token_file=str(SERVICE_ACCOUNT_DIR / "token"),
    )


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT"))


def default_config(path: str | Path | None, context: str | None) -> KubeConfig:
    """What a program that may run in a pod connects with, in controller-runtime's order:
    ``path``; $KUBECONFIG; the pod's service account; ~/.kube/config. A ``context`` skips the
    service account (only a kubeconfig has contexts)."""
    if path is not None or os.environ.get(KUBECONFIG_ENV):
        return load_kubeconfig(path, context)
    if in_cluster() and context is None:
        return in_cluster_config()
    return load_kubeconfig(None, context)


# ------------------------------------------------------------------ exec plugins


@dataclass(frozen=True, slots=True)
class ExecPlugin:
    """A user's ``exec`` section, checked, with the cluster facts it may be told."""

    where: str  # "<file>: users[NAME].user.exec", for errors
    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"
    cluster_info: Mapping[str, Any] | None = None  # with provideClusterInfo


def exec_plugin(user: Entry, cluster: Entry) -> ExecPlugin:
    spec = user.body["exec"]
    where = f"{user.source}: users[{user.name}].user.exec"
    if not isinstance(spec, Mapping):
        raise KubeconfigError(f"{where}: not a mapping")
    api_version = str(spec.get("apiVersion") or "")
    if api_version not in EXEC_API_VERSIONS:
        raise KubeconfigError(
            f"{where}.apiVersion: {api_version or 'not set'}; supported: {', '.join(EXEC_API_VERSIONS)}"
        )
    command = str(spec.get("command") or "")
    if not command:
        raise KubeconfigError(f"{where}.command is not set")
    # As kubectl: a relative command with a folder in it is relative to the kubeconfig's folder;
    # a bare name is looked up on PATH.
    if os.sep in command and not os.path.isabs(command) and user.base is not None:
        command = str(user.base / command)
    mode = str(spec.get("interactiveMode") or "")
    if not mode and api_version.endswith("/v1"):
        raise KubeconfigError(f"{where}.interactiveMode is required by {api_version}")
    mode = mode or "IfAvailable"
    if mode not in ("Never", "IfAvailable", "Always"):
        raise KubeconfigError(f"{where}.interactiveMode: {mode}; one of Never, IfAvailable, Always")
    env: list[tuple[str, str]] = []
    for i, item in enumerate(spec.get("env") or []):
        if not isinstance(item, Mapping) or not item.get("name"):
            raise KubeconfigError(f"{where}.env[{i}]: needs a name and a value")
        env.append((str(item["name"]), str(item.get("value") or "")))
    return ExecPlugin(
        where=where,
        api_version=api_version,
        command=command,
        args=tuple(str(a) for a in spec.get("args") or []),
        env=tuple(env),
        install_hint=str(spec.get("installHint") or ""),
        interactive_mode=mode,
        cluster_info=_cluster_info(cluster) if spec.get("provideClusterInfo") else None,
    )


def _cluster_info(cluster: Entry) -> dict[str, Any]:
    """The ExecCredential's spec.cluster: what the plugin may need to know about the cluster."""
    c = cluster.body
    info: dict[str, Any] = {"server": str(c.get("server") or "")}
    for key, field_name in (
        ("tls-server-name", "tls-server-name"),
        ("insecure-skip-tls-verify", "insecure-skip-tls-verify"),
        ("proxy-url", "proxy-url"),
        ("certificate-authority-data", "certificate-authority-data"),
    ):
        if c.get(key):
            info[field_name] = c[key]
    if (
        not c.get("certificate-authority-data")
        and c.get("certificate-authority")
        and cluster.base is not None
    ):
        with_base = cluster.base / str(c["certificate-authority"])
        # A missing file is reported by the connection itself.
        with contextlib.suppress(OSError):
            info["certificate-authority-data"] = base64.b64encode(with_base.read_bytes()).decode()
    for extension in c.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


@dataclass
class ExecAuthenticator:
    """An exec plugin's credential, asked for once and kept until it expires or is refused."""

    plugin: ExecPlugin
    clock: Any = field(default=lambda: datetime.datetime.now(datetime.UTC))
    cached: Credential | None = None
    expires: datetime.datetime | None = None
    runs: int = 0
    _lock: asyncio.Lock | None = field(default=None, repr=False)
    _lock_loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)

    def _lock_of_loop(self) -> asyncio.Lock:
        # One CLI command may run several event loops in turn; a lock belongs to one.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def _fresh(self) -> bool:
        return self.cached is not None and (self.expires is None or self.clock() < self.expires)

    async def credential(self) -> Credential:
        if self._fresh():
            assert self.cached is not None
            return self.cached
        async with self._lock_of_loop():
            # Concurrent requests share one run of the plugin.
            if not self._fresh():
                self.cached, self.expires = await self._run()
            assert self.cached is not None
            return self.cached

    def rejected(self, used: Credential) -> bool:
        if self.cached == used:
            self.cached = None
        return True

    async def _run(self) -> tuple[Credential, datetime.datetime | None]:
        plugin = self.plugin
        interactive = plugin.interactive_mode != "Never" and sys.stdin is not None and sys.stdin.isatty()
        if plugin.interactive_mode == "Always" and not interactive:
            raise KubeconfigError(
                f"{plugin.where}.interactiveMode: Always, but pykueue has no terminal to give the plugin"
            )
        spec: dict[str, Any] = {"interactive": interactive}
        if plugin.cluster_info is not None:
            spec["cluster"] = plugin.cluster_info
        info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": orjson.dumps(info).decode()}
        self.runs += 1
        try:
            process = await asyncio.create_subprocess_exec(
                plugin.command,
                *plugin.args,
                env=env,
                stdin=None if interactive else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                # The plugin's messages (a login prompt, its errors) go where ours go, as kubectl's do.
                stderr=None,
            )
        except OSError as exc:
            hint = f"; {plugin.install_hint}" if plugin.install_hint else ""
            raise KubeconfigError(f"{plugin.where}.command {plugin.command}: {exc}{hint}") from None
        out, _ = await process.communicate()
        if process.returncode != 0:
            raise KubeconfigError(f"{plugin.where}: {plugin.command} exited with status {process.returncode}")
        return parse_exec_credential(out, plugin)


def parse_exec_credential(out: bytes, plugin: ExecPlugin) -> tuple[Credential, datetime.datetime | None]:
    """An exec plugin's ExecCredential: the credential and when it expires (None: never)."""
    where = f"{plugin.where}: the plugin's ExecCredential"
    try:
        doc = orjson.loads(out)
    except orjson.JSONDecodeError as exc:
        raise KubeconfigError(f"{where}: not JSON ({exc})") from None
    if not isinstance(doc, Mapping) or doc.get("kind") != "ExecCredential":
        raise KubeconfigError(f"{where}: kind is not ExecCredential")
    if doc.get("apiVersion") != plugin.api_version:
        raise KubeconfigError(f"{where}: apiVersion {doc.get('apiVersion')}, expected {plugin.api_version}")
    status = doc.get("status")
    if not isinstance(status, Mapping):
        raise KubeconfigError(f"{where}: status is missing")
    token = str(status.get("token") or "") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if bool(cert) != bool(key):
        raise KubeconfigError(f"{where}: status.clientCertificateData and clientKeyData come together")
    if token is None and not cert:
        raise KubeconfigError(f"{where}: status has neither token nor clientCertificateData")
    expires = None
    if status.get("expirationTimestamp"):
        try:
            expires = datetime.datetime.fromisoformat(
                str(status["expirationTimestamp"]).replace("Z", "+00:00")
            )
        except ValueError:
            raise KubeconfigError(
                f"{where}: status.expirationTimestamp {status['expirationTimestamp']!r} is not RFC 3339"
            ) from None
        if expires.tzinfo is None:
            raise KubeconfigError(f"{where}: status.expirationTimestamp has no time zone")
    credential = Credential(
        token=token,
        cert_data=str(cert).encode() if cert else None,
        key_data=str(key).encode() if key else None,
    )
    return credential, expires


# ------------------------------------------------------------------ auth-provider (OIDC)


@dataclass
class OidcAuthenticator:
    """An auth-provider oidc's id-token, sent while it has not expired."""

    where: str
    id_token: str
    expires: datetime.datetime | None
    clock: Any = field(default=lambda: datetime.datetime.now(datetime.UTC))

    async def credential(self) -> Credential:
        if self.expires is not None and self.clock() >= self.expires:
            raise KubeconfigError(
                f"{self.where}.config.id-token expired at {self.expires.isoformat()}; pykueue does not "
                "refresh OIDC tokens: refresh it (for example with any kubectl command) or use an exec "
                "plugin such as kubelogin"
            )
        return Credential(token=self.id_token)

    def rejected(self, used: Credential) -> bool:
        return False  # the same token again would be refused again


def oidc_authenticator(provider: Any, where: str) -> OidcAuthenticator:
    if not isinstance(provider, Mapping):
        raise KubeconfigError(f"{where}: not a mapping")
    name = str(provider.get("name") or "")
    if name != "oidc":
        raise KubeconfigError(
            f"{where}.name: {name or 'not set'}; only the oidc auth-provider is supported (gcp and azure "
            "were removed from kubectl: use their exec plugins, gke-gcloud-auth-plugin or kubelogin)"
        )
    config = provider.get("config") or {}
    token = str(config.get("id-token") or "") if isinstance(config, Mapping) else ""
    if not token:
        raise KubeconfigError(
            f"{where}.config.id-token is not set; pykueue does not log in to the OIDC issuer: log in "
            "with kubectl (or kubelogin) first"
        )
    return OidcAuthenticator(where, token, jwt_expiry(token, f"{where}.config.id-token"))


def jwt_expiry(token: str, where: str) -> datetime.datetime | None:
    """The ``exp`` claim of a JWT (not verified: only the API server can say whether it is good)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise KubeconfigError(f"{where}: not a JWT")
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError) as exc:
        raise KubeconfigError(f"{where}: not a JWT ({exc})") from None
    exp = claims.get("exp") if isinstance(claims, Mapping) else None
    if exp is None:
        return None
    try:
        return datetime.datetime.fromtimestamp(float(exp), datetime.UTC)
    except (TypeError, ValueError, OverflowError):
        raise KubeconfigError(f"{where}: exp claim {exp!r} is not a time") from None
