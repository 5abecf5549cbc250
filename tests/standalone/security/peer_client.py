"""Requests on the server's Unix socket made by a real process running as another Unix user.

The CLI's interpreter lives under root's home here, so another user cannot
start it; instead the test process forks, the child drops to the user's uid
and gid (a real credential change the kernel then reports to the server) and
sends one HTTP request with the standard library, and the parent reads the
answer through a pipe.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import socket
from dataclasses import dataclass
from typing import Any


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("pykueue", timeout=30)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(self.path)
        self.sock = sock


@dataclass
class Answer:
    status: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def request_as(user: pwd.struct_passwd, socket_path: str, method: str, path: str, body: Any = None) -> Answer:
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, ask, report, exit without running pytest's teardown
        try:
            os.close(reader)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            connection = _UnixConnection(socket_path)
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            out = {"status": response.status, "text": response.read().decode(errors="replace")}
        except BaseException as exc:
            out = {"status": -1, "text": repr(exc)}
        os.write(writer, json.dumps(out).encode())
        os._exit(0)
    os.close(writer)
    chunks = []
    while chunk := os.read(reader, 65536):
        chunks.append(chunk)
    os.close(reader)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks))
    return Answer(int(result["status"]), str(result["text"]))


def raw_request(socket_path: str, method: str, path: str) -> Answer:
    """One request with the path sent exactly as written (no client-side normalisation of %2e)."""
    connection = _UnixConnection(socket_path)
    connection.putrequest(method, path, skip_accept_encoding=True)
    connection.endheaders()
    response = connection.getresponse()
    return Answer(response.status, response.read().decode(errors="replace"))
