"""The control plane's child processes, and waiting for them: what `controlplane` is built on.

Each component runs as a `Process` in a process group of its own, logging to a file, and
dies with the test process even when that one is killed (a parent-death signal); `wait_for`
polls for a condition while watching that none of them exited. `ControlPlaneError` is what
goes wrong building, starting or reaching a control plane.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or reached."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that nobody listens on right now."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def host_address() -> str | None:
    """This machine's IPv4 address on its first non-loopback route, or None when it has none.

    What the API server can be given as an endpoint: it refuses loopback addresses there.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        # A UDP "connect" sends nothing; it only picks the outgoing interface.
        for target in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
            with contextlib.suppress(OSError):
                probe.connect((target, 9))
                address = str(probe.getsockname()[0])
                if not address.startswith("127.") and address != "0.0.0.0":
                    return address
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    return free_ports(1)[0]


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    watch: Iterable[Process] = (),
) -> T:
    """Call ``probe`` until it returns something truthy; fail after ``timeout`` seconds.

    The processes in ``watch`` are checked on every round: if one of them exits, waiting
    stops at once with the tail of its log.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    watched = list(watch)
    while True:
        for proc in watched:
            proc.check_running()
        try:
            result = probe()
        except (OSError, ControlPlaneError, ValueError) as exc:
            last_error, result = exc, None
        if result:
            return result
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def _set_parent_death_signal() -> None:
    """In the child before exec: die with SIGKILL if the test process dies without cleaning up."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


_LIVE_PROCESSES: list[Process] = []


@dataclass
class Process:
    """A control plane component, started in a process group of its own, logging to a file."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    def start(self) -> Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_set_parent_death_signal,
            )
        self.started_at = time.monotonic()
        _LIVE_PROCESSES.append(self)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def exited(self) -> bool:
        return self.popen is not None and self.popen.poll() is not None

    def exit_message(self) -> str:
        assert self.popen is not None
        return (
            f"{self.name} exited with code {self.popen.returncode}; last lines of {self.log_path}:\n"
            f"{self.log_tail()}"
        )

    def check_running(self) -> None:
        if self.exited():
            raise ControlPlaneError(self.exit_message())

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the whole process group, then SIGKILL if it has not exited after ``grace``."""
        if self.popen is None:
            return
        with contextlib.suppress(ValueError):
            _LIVE_PROCESSES.remove(self)
        pgid = self.popen.pid  # start_new_session: the child leads its own group
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # The leader is gone; anything else left in its group goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5.0)


def stop_all_processes() -> None:
    """Stop every component still running, newest first (a safety net for aborted sessions)."""
    for proc in reversed(list(_LIVE_PROCESSES)):
        proc.stop()
