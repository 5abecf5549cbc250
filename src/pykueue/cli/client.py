"""The CLI's side of the standalone API: where the server is, which token, and one HTTP call.

The server and token come from, in order: ``--server``/``--token``, the
environment (``PYKUEUE_SERVER``, ``PYKUEUE_TOKEN``), then the client config
``pykueue up`` writes (``$XDG_CONFIG_HOME/pykueue/client.json``, mode 0600).
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


class ClientError(Exception):
    """A request failed; ``problems`` are the server's lines of detail."""

    def __init__(self, message: str, problems: list[str] | None = None, status: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.problems = problems or []
        self.status = status


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "pykueue"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "pykueue"


def client_config_path() -> Path:
    return config_home() / "client.json"


@dataclass(frozen=True)
class Client:
    server: str
    token: str
    timeout: float = 30.0

    @staticmethod
    def resolve(server: str | None, token: str | None) -> Client:
        server = server or os.environ.get("PYKUEUE_SERVER")
        token = token or os.environ.get("PYKUEUE_TOKEN")
        if not (server and token):
            path = client_config_path()
            try:
                saved = json.loads(path.read_text())
            except (OSError, ValueError):
                saved = {}
            server = server or saved.get("server")
            token = token or saved.get("token")
        if not server:
            raise ClientError("no server: run `pykueue up`, or pass --server / set PYKUEUE_SERVER")
        return Client(server.rstrip("/"), token or "")

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = httpx.request(
                method, self.server + path, headers=headers, timeout=self.timeout, **kwargs
            )
        except httpx.HTTPError as exc:
            raise ClientError(
                f"cannot reach pykueue at {self.server}: {exc} (is `pykueue up` running?)"
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
