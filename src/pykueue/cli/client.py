"""The CLI's side of the standalone API: which server, how to reach it, and one HTTP call.

Two ways in, chosen in this order:

1. ``--server``/``--token`` or ``PYKUEUE_SERVER``/``PYKUEUE_TOKEN``: HTTP with that token;
2. ``--socket``/``PYKUEUE_SOCKET``, the socket in the client config that ``pykueue up``
   writes (``$XDG_CONFIG_HOME/pykueue/client.json``, mode 0600), or a well-known socket
   (`paths.well_known_sockets`): the server's Unix socket, where the kernel tells the
   server who we are and no token is needed;
3. the client config's URL and admin token.

The calls use the standard library's ``http.client``: a command makes one or
two requests, and importing an HTTP client library would cost more than they
take (docs/performance.md, "CLI start-up"). Every failure becomes `ClientError`
with a message for the terminal, never a traceback: the API's refusals are
printed as it wrote them.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlencode, urlsplit

from pykueue import paths

T = TypeVar("T")

SOCKET_BASE_URL = "http://pykueue"


class ClientError(Exception):
    """A request failed; ``problems`` are the server's lines of detail."""

    def __init__(self, message: str, problems: list[str] | None = None, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.problems = problems or []
        self.status = status


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the host name is only what the Host header says)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("pykueue", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _saved() -> dict[str, Any]:
    try:
        saved = json.loads(paths.client_config_path().read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


@dataclass(frozen=True)
class Client:
    server: str
    token: str
    socket: str = ""  # when set, requests go over this Unix socket and carry no token
    timeout: float = 30.0

    @staticmethod
    def resolve(server: str | None, token: str | None, socket: str | None = None) -> Client:
        server = server or os.environ.get("PYKUEUE_SERVER")
        token = token or os.environ.get("PYKUEUE_TOKEN")
        saved = _saved()
        if not (server or token):
            socket = socket or os.environ.get("PYKUEUE_SOCKET")
            if not socket:
                candidates = [Path(saved["socket"])] if saved.get("socket") else []
                socket = next(
                    (str(p) for p in [*candidates, *paths.well_known_sockets()] if p.is_socket()), None
                )
            if socket:
                return Client(SOCKET_BASE_URL, "", socket)
        server = server or saved.get("server")
        token = token or saved.get("token")
        if not server:
            raise ClientError(
                "no server: run `pykueue up`, or pass --socket / --server (PYKUEUE_SOCKET / PYKUEUE_SERVER)"
            )
        return Client(str(server).rstrip("/"), str(token or ""))

    @property
    def where(self) -> str:
        return f"the socket {self.socket}" if self.socket else self.server

    def _connection(self) -> tuple[http.client.HTTPConnection, str]:
        if self.socket:
            return _UnixConnection(self.socket, self.timeout), ""
        url = urlsplit(self.server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ClientError(f"the server must be an http:// or https:// URL, not {self.server!r}")
        kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        return kind(url.hostname, url.port, timeout=self.timeout), url.path.rstrip("/")

    def request(
        self, method: str, path: str, params: dict[str, Any] | None = None, json_body: Any = None
    ) -> Any:
        connection, prefix = self._connection()
        headers = {"Accept": "application/json"}
        if self.token and not self.socket:
            headers["Authorization"] = f"Bearer {self.token}"
        body = None
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        target = prefix + path + (f"?{urlencode(params)}" if params else "")
        try:
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ClientError(
                f"cannot reach pykueue at {self.where}: {exc} (is `pykueue up` running?)"
            ) from None
        finally:
            connection.close()
        text = data.decode("utf-8", errors="replace")
        is_json = (response.getheader("content-type") or "").startswith("application/json")
        if response.status >= 400:
            try:
                error = json.loads(text)
            except ValueError:
                raise ClientError(f"HTTP {response.status}: {text[:500]}", status=response.status) from None
            raise ClientError(
                str(error.get("error", f"HTTP {response.status}")),
                [str(p) for p in error.get("problems", [])],
                response.status,
            )
        return json.loads(text) if is_json else text

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json_body=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)


# --- for the commands: a failure is printed for the terminal, never a traceback ----------------


def fail(message: str, problems: list[str] | None = None) -> NoReturn:
    """Print ``message`` (and each problem that says more) on stderr and exit 1."""
    print(f"error: {message}", file=sys.stderr)
    for problem in problems or []:
        if problem != message:
            print(f"  {problem}", file=sys.stderr)
    raise SystemExit(1)


def call(action: Callable[[], T]) -> T:
    """Run one request; a failure is printed for the terminal (never a traceback) and exits 1."""
    try:
        return action()
    except ClientError as exc:
        fail(exc.message, exc.problems)


def client(server: str | None, token: str | None, socket: str | None = None) -> Client:
    """The client for these options (see `Client.resolve`), or a printed failure."""
    return call(lambda: Client.resolve(server, token, socket))
