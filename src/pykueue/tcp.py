"""Whether something listens at an address: the one network check both homes share.

Standalone mode's readiness probes (``tcpSocket``) and the Kubernetes controller's
webhook registration (is the registered replica still up?) ask the same question.
"""

from __future__ import annotations

import asyncio
import contextlib


async def accepts_connections(host: str, port: int, timeout: float) -> bool:
    """Whether something listens at ``host:port`` within ``timeout`` seconds (a TCP connect)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
