"""The server's side of `launcher`: start it, ask it for pods, hear when they end.

`LauncherClient.spawn` returns a `LaunchedProcess` with what the executor
needs of a child process: its ``pid``, ``wait()`` and ``returncode``. The pods
are the launcher's children, not the server's; the server still signals them
by pid, process group and cgroup as before.

If the launcher dies while the server lives, every pod it was watching is
reported ended with ``LAUNCHER_LOST`` (their exit codes are gone with it) and
the executor treats them as failed; the next spawn starts a new launcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

LAUNCHER_LOST = -int(signal.SIGKILL)


class LaunchError(Exception):
    """The launcher could not start the pod (fork failed, or the launcher is gone)."""


class FenceError(LaunchError):
    """The pod could not be fenced in (its log, cgroup, user or folder): its command never ran."""


@dataclass
class LaunchedProcess:
    pid: int
    returncode: int | None = None
    _ended: asyncio.Future[int] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def end(self, code: int) -> None:
        if not self._ended.done():
            self.returncode = code
            self._ended.set_result(code)


class LauncherClient:
    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._spawns: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._running: dict[int, LaunchedProcess] = {}
        self._early: dict[int, int] = {}  # exits heard before their spawn's answer was read
        self._serial = 0

    async def start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "pykueue.standalone.node.launcher",
                str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        reader, self._writer = await asyncio.open_unix_connection(sock=ours, limit=1 << 22)
        self._reading = asyncio.create_task(self._read(reader), name="launcher")

    async def spawn(self, request: dict[str, Any]) -> LaunchedProcess:
        if self._writer is None or self._writer.is_closing():
            await self.start()
        assert self._writer is not None
        self._serial += 1
        ask = self._serial
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._spawns[ask] = answer
        self._writer.write(json.dumps({**request, "id": ask}).encode() + b"\n")
        await self._writer.drain()
        reply = await answer
        if "error" in reply:
            raise (FenceError if reply.get("fence") else LaunchError)(str(reply["error"]))
        process = LaunchedProcess(int(reply["pid"]))
        early = self._early.pop(process.pid, None)
        if early is not None:
            process.end(early)
        else:
            self._running[process.pid] = process
        return process

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                message = json.loads(line)
                if "exited" in message:
                    self._ended(int(message["exited"]), int(message["code"]))
                else:
                    waiter = self._spawns.pop(int(message["id"]), None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(message)
        finally:
            self._lost()

    def _ended(self, pid: int, code: int) -> None:
        process = self._running.pop(pid, None)
        if process is None:
            self._early[pid] = code
        else:
            process.end(code)

    def _lost(self) -> None:
        for waiter in self._spawns.values():
            if not waiter.done():
                waiter.set_result({"error": "the pod launcher is gone"})
        self._spawns.clear()
        for process in self._running.values():
            process.end(LAUNCHER_LOST)
        self._running.clear()
        if self._writer is not None:
            self._writer.close()
        self._writer = None

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reading, timeout=5)
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()
