"""The CLI's side of the standalone API: which server, how to reach it, and one HTTP call.

Two ways in, chosen in this order:

1. ``--server``/``--token`` or ``PYKUEUE_SERVER``/``PYKUEUE_TOKEN``: HTTP with that token;
2. ``--socket``/``PYKUEUE_SOCKET``, the socket in the client config that ``pykueue up``
   writes (``$XDG_CONFIG_HOME/pykueue/client.json``, mode 0600), or a well-known socket
   (`paths.well_known_sockets`): the server's Unix socket, where the kernel tells the
   server who we are and no token is needed;
3. the client config's URL and admin token.

Every failure becomes `ClientError` with a message for the terminal, never a
traceback: the API's refusals are printed as it wrote them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pykueue import paths

SOCKET_BASE_URL = "http://pykueue"


class ClientError(Exception):
    """A request failed; ``problems`` are the server's lines of detail."""

    def __init__(self, message: str, problems: list[str] | None = None, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.problems = problems or []
        self.status = status


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

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token and not self.socket else {}
        transport = httpx.HTTPTransport(uds=self.socket) if self.socket else None
        try:
            with httpx.Client(transport=transport, timeout=self.timeout) as http:
                response = http.request(method, self.server + path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError(
                f"cannot reach pykueue at {self.where}: {exc} (is `pykueue up` running?)"
            ) from None
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                raise ClientError(
                    f"HTTP {response.status_code}: {response.text[:500]}", status=response.status_code
                ) from None
            raise ClientError(
                str(body.get("error", f"HTTP {response.status_code}")),
                [str(p) for p in body.get("problems", [])],
                response.status_code,
            )
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)
