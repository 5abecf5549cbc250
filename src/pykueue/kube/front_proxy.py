"""Who is asking, when the API server forwards a request to us as an aggregated API.

The API server (its aggregation layer, the "front proxy") calls an APIService's
backend over TLS with its own client certificate and says who the real caller is
in headers (``X-Remote-User``, ``X-Remote-Group``, ``X-Remote-Extra-<key>``). The
headers are worth nothing by themselves: anyone can send them. They are believed
only when the connection carried a client certificate that

1. chains to the *request-header CA* (not the cluster's client CA), and
2. names one of the allowed proxies in its common name (any name, when the list is
   empty, as the API server reads an empty ``--requestheader-allowed-names``).

The API server publishes those settings in the ConfigMap
``kube-system/extension-apiserver-authentication`` (`RequestHeaderConfig.load`),
readable through the built-in Role ``extension-apiserver-authentication-reader``.

TLS verifies (1) during the handshake (`RequestHeaderConfig.trust`, which makes
client certificates optional, so the API server's webhook calls without one still
connect); uvicorn gives the application no view of the peer certificate, so
`PeerCertProtocol` puts its subject into the ASGI scope (the ``tls`` extension's
``client_cert_name``) for `identify` to check (2).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from pykueue.kube import certs

AUTH_CONFIGMAP_NAMESPACE = "kube-system"
AUTH_CONFIGMAP_NAME = "extension-apiserver-authentication"


@dataclass(frozen=True)
class User:
    """The caller the front proxy vouches for."""

    name: str
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestHeaderConfig:
    """The API server's ``--requestheader-*`` settings."""

    client_ca: bytes
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_headers_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_configmap(cls, configmap: Mapping[str, Any]) -> RequestHeaderConfig:
        """Parse the ConfigMap; ValueError naming the key when it lacks the request-header CA."""
        data = configmap.get("data") or {}
        ca = str(data.get("requestheader-client-ca-file") or "")
        if not ca.strip():
            raise ValueError(
                f"ConfigMap {AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME}: data.requestheader-client-ca-file "
                "is missing (the API server runs without --requestheader-client-ca-file, so it cannot proxy "
                "to aggregated APIs)"
            )

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            raw = data.get(key)
            if raw is None:
                return default
            try:
                values = json.loads(raw)
            except ValueError as exc:
                raise ValueError(
                    f"ConfigMap {AUTH_CONFIGMAP_NAMESPACE}/{AUTH_CONFIGMAP_NAME}: data.{key}: not a JSON list ({exc})"
                ) from None
            return tuple(str(v) for v in values or ())

        return cls(
            client_ca=ca.encode(),
            allowed_names=names("requestheader-allowed-names", ()),
            username_headers=names("requestheader-username-headers", cls.username_headers),
            group_headers=names("requestheader-group-headers", cls.group_headers),
            extra_headers_prefixes=names("requestheader-extra-headers-prefix", cls.extra_headers_prefixes),
        )

    @classmethod
    async def load(cls, kube: certs.KubeAccess) -> RequestHeaderConfig:
        """Read the API server's published settings (`NotFound` when it publishes none)."""
        configmap = await kube.get("ConfigMap", AUTH_CONFIGMAP_NAMESPACE, AUTH_CONFIGMAP_NAME)
        return cls.from_configmap(configmap)

    def trust(self, context: ssl.SSLContext) -> None:
        """Ask clients for a certificate, verify any given against the request-header CA."""
        context.load_verify_locations(cadata=self.client_ca.decode())
        context.verify_mode = ssl.CERT_OPTIONAL


def identify(config: RequestHeaderConfig, cert_common_name: str | None, headers: Any) -> User | None:
    """The user the headers name, when a trusted proxy sent them; None otherwise.

    ``headers`` is a Starlette ``Headers`` (case-insensitive, ``getlist`` for repeats).
    """
    if not cert_common_name:
        return None
    if config.allowed_names and cert_common_name not in config.allowed_names:
        return None
    name = next((v for h in config.username_headers for v in headers.getlist(h) if v), "")
    if not name:
        return None
    groups = tuple(v for h in config.group_headers for v in headers.getlist(h) if v)
    extra: dict[str, tuple[str, ...]] = {}
    for key, value in headers.items():
        for prefix in config.extra_headers_prefixes:
            if key.lower().startswith(prefix.lower()):
                extra_key = key[len(prefix) :].lower()
                extra[extra_key] = (*extra.get(extra_key, ()), value)
    return User(name, groups, extra)


def common_name(scope: Mapping[str, Any]) -> str | None:
    """The verified client certificate's common name that `PeerCertProtocol` put in the scope."""
    tls = (scope.get("extensions") or {}).get("tls") or {}
    subject = tls.get("client_cert_subject") or ()
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class PeerCertProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol that shows the app the client certificate TLS verified."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        # getpeercert() is empty unless the handshake verified a certificate.
        peer = ssl_object.getpeercert() if ssl_object is not None else None
        if peer:
            self.app = _with_peer(self.app, peer.get("subject") or ())


def _with_peer(app: Any, subject: Sequence[Any]) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            extensions = scope.setdefault("extensions", {}) or {}
            extensions["tls"] = {**(extensions.get("tls") or {}), "client_cert_subject": subject}
            scope["extensions"] = extensions
        await app(scope, receive, send)

    return wrapped
