"""A real HTTP server on 127.0.0.1 that answers as a test scripts it.

The API server's rare answers (429, 503, 410 in the middle of a watch) cannot be
made to happen on demand on a real one, so `KubernetesStore` meets them here: a
real socket, real HTTP, and a handler that decides each answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], web.StreamResponse | Awaitable[web.StreamResponse]]


def status(code: int, reason: str = "", **extra: Any) -> web.Response:
    """A metav1.Status answer, as the API server sends errors."""
    body = {"kind": "Status", "code": code, "reason": reason, "message": reason, **extra}
    return web.json_response(body, status=code)


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """Serve every path with ``handler`` until the block ends; yields the base URL."""

    async def answer(request: web.Request) -> web.StreamResponse:
        reply = handler(request)
        return await reply if isinstance(reply, Awaitable) else reply

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
