"""The test plays a Ray head's dashboard, the one thing a kwok node cannot run.

KubeRay decides that a RayJob's Ray job ended by asking the head's dashboard
(``GET /api/jobs/<id>``). With ``--use-kubernetes-proxy`` it asks through the API
server's service proxy, and the API server only proxies to an endpoint that is a pod
whose IP matches. So the test gives the head pod this machine's own (non-loopback)
address, which the API server accepts to proxy to, and answers there, on the
dashboard's port, as a Ray head would once the job is over.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DASHBOARD_PORT = 8265  # the port of the head Service's `dashboard` port, as KubeRay makes it
JOB_PATH = "/api/jobs/"


def host_address() -> str:
    """This machine's address on its default route: not loopback, which the API server will not proxy to."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route's source address
        address = str(probe.getsockname()[0])
    except OSError as exc:
        raise RuntimeError(f"this machine has no IPv4 route to find its own address by: {exc}") from None
    finally:
        probe.close()
    if address.startswith("127.") or address == "0.0.0.0":
        raise RuntimeError(
            f"this machine's only IPv4 address is {address}: the API server will not proxy there"
        )
    return address


class _Handler(BaseHTTPRequestHandler):
    server: _Dashboard

    def do_GET(self) -> None:
        if not self.path.startswith(JOB_PATH):
            self.send_error(404)
            return
        job_id = self.path[len(JOB_PATH) :].strip("/")
        self.server.asked.append(job_id)
        body = json.dumps(
            {
                "job_id": job_id,
                "submission_id": job_id,
                "status": self.server.status,
                "message": "played by the test",
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


class _Dashboard(ThreadingHTTPServer):
    status = "SUCCEEDED"

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.asked: list[str] = []


@contextmanager
def ray_dashboard(status: str = "SUCCEEDED") -> Iterator[_Dashboard]:
    """A dashboard on this machine's address that reports every job in ``status``."""
    server = _Dashboard((host_address(), DASHBOARD_PORT))
    server.status = status
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
