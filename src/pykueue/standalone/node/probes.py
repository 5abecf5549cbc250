"""Readiness of a local pod: a container's ``readinessProbe``, run as the kubelet runs it.

A pod is ready when its process runs and, if its container has a readiness
probe, the probe has passed ``successThreshold`` times in a row since it last
failed ``failureThreshold`` times in a row (both default as in Kubernetes:
1 and 3). The probe runs every ``periodSeconds`` (10) after
``initialDelaySeconds`` (0), each try given ``timeoutSeconds`` (1):

    exec.command      run inside the pod's fences (its user, folder, environment and
                      cgroup, as a container's exec probe runs inside the container);
                      exit code 0 passes
    tcpSocket.port    a TCP connection to host (default 127.0.0.1) and port opens

An ``httpGet`` or ``grpc`` probe is not run here: such a pod counts as ready
while it runs, and its Job's status says why (docs/standalone.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pykueue.store.base import Manifest
from pykueue.tcp import accepts_connections

UNSUPPORTED_WARNING = (
    "readinessProbe {kind} is not run in standalone mode: the pod counts as ready while it runs"
)


@dataclass(frozen=True, slots=True)
class Probe:
    kind: str  # "exec" or "tcpSocket"
    command: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @staticmethod
    def of_container(container: Manifest) -> tuple[Probe | None, str]:
        """The container's readiness probe, or None; and a warning when it cannot be run here."""
        raw = container.get("readinessProbe")
        if not isinstance(raw, dict):
            return None, ""
        timing: dict[str, Any] = {
            "initial_delay": float(raw.get("initialDelaySeconds") or 0),
            "period": float(raw.get("periodSeconds") or 10),
            "timeout": float(raw.get("timeoutSeconds") or 1),
            "success_threshold": int(raw.get("successThreshold") or 1),
            "failure_threshold": int(raw.get("failureThreshold") or 3),
        }
        if isinstance(raw.get("exec"), dict):
            command = tuple(str(a) for a in raw["exec"].get("command") or [])
            return (Probe("exec", command=command, **timing) if command else None), ""
        if isinstance(raw.get("tcpSocket"), dict):
            socket = raw["tcpSocket"]
            port = socket.get("port")
            if isinstance(port, int):
                return Probe(
                    "tcpSocket", host=str(socket.get("host") or "127.0.0.1"), port=port, **timing
                ), ""
        kind = next((k for k in ("httpGet", "grpc", "tcpSocket") if k in raw), "of this kind")
        return None, UNSUPPORTED_WARNING.format(kind=kind)


async def try_once(probe: Probe, run_exec: Callable[[tuple[str, ...], float], Awaitable[bool]]) -> bool:
    """One try of the probe; ``run_exec`` runs a command in the pod's fences within a timeout."""
    if probe.kind == "exec":
        return await run_exec(probe.command, probe.timeout)
    return await accepts_connections(probe.host, probe.port, probe.timeout)


async def watch(
    probe: Probe,
    run_exec: Callable[[tuple[str, ...], float], Awaitable[bool]],
    changed: Callable[[bool], Awaitable[None]],
) -> None:
    """Probe until cancelled; ``changed(ready)`` whenever readiness flips (it starts not ready)."""
    await asyncio.sleep(probe.initial_delay)
    ready, passes, failures = False, 0, 0
    while True:
        if await try_once(probe, run_exec):
            passes, failures = passes + 1, 0
            if not ready and passes >= probe.success_threshold:
                ready = True
                await changed(True)
        else:
            passes, failures = 0, failures + 1
            if ready and failures >= probe.failure_threshold:
                ready = False
                await changed(False)
        await asyncio.sleep(probe.period)
