"""Starting pods through a small helper process, so a pod start costs a millisecond, not a big fork.

A pod must join its cgroup and drop to its owner's user *between fork and
exec*; done by the server itself, that is a full ``fork()`` of a process with
hundreds of megabytes mapped (about 20 ms each, and copy-on-write faults in
the server afterwards), because Python uses the cheap ``vfork()`` only when
nothing runs in the child. Instead the server starts this module once, as a
process of a few megabytes that imports nothing but the standard library, and
asks it over a socket pair to start each pod:

    server -> launcher   {"id": n, "argv": [...], "env": {...}, "cwd": "...", "log": "...",
                          "cgroups": [".../cgroup.procs", ...], "user": {"uid", "gid", "groups", "name"} | null}
    launcher -> server   {"id": n, "pid": p}            the pod runs (or {"id": n, "error": "..."})
                         {"id": n, "error": "...", "fence": true}
                                                        it could not be fenced in (log, cgroup,
                                                        user, folder): it never ran its command
                         {"exited": p, "code": c}       it ended (c < 0: killed by signal -c)

one JSON object per line. In the child, in this order: a new session; output
to the pod's log (opened as the server's user, so the owner needs no access
to the data folder); the cgroups; the owner's groups, gid and uid; umask 022;
the working folder (entered as the owner: the kernel checks); the signals
Python ignores set back to their defaults; exec with the job's environment.
A failing step is written to the log and ends the child with 126 (127 when
the command is not found), as a shell does. A failure to fence the pod in is
also written on a close-on-exec pipe the launcher reads before it answers (as
`subprocess` learns of a failed exec): such a pod never ran, so the server is
told so instead of seeing an exit code it could not tell from the command's.

The launcher dies with the server (``PR_SET_PDEATHSIG``, and end of file on
its socket); the pods do not, and a restarted server kills them like any
other leftover (`executor`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
START_FAILED = 126
NOT_FOUND = 127


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _fail(code: int, message: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"--- pykueue: {message}\n".encode())
    os._exit(code)


def _child(request: dict[str, Any], report: int) -> None:
    """In the forked child: fence itself in, then become the pod's command. Never returns.

    ``report``: the write end of the close-on-exec pipe a failure to fence in is told on.
    """
    step = "open its log"
    try:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, report)
        os.closerange(report + 1, 65536)
        step = "join its cgroup"
        pid = str(os.getpid()).encode()
        for path in request.get("cgroups") or []:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        user = request.get("user")
        if user is not None:
            step = f"switch to user {user['name']} (uid {user['uid']})"
            os.setgroups([int(g) for g in user["groups"]])
            os.setgid(int(user["gid"]))
            os.setuid(int(user["uid"]))
        os.umask(0o022)
        as_whom = f" as {user['name']}" if user is not None else ""
        step = f"enter its working folder {request['cwd']}{as_whom}"
        os.chdir(request["cwd"])
    except OSError as exc:
        failure = f"could not {step}: {exc.strerror}"
        with contextlib.suppress(OSError):
            os.write(report, failure.encode())
        _fail(START_FAILED, f"the pod {failure}")
    for name in ("SIGPIPE", "SIGXFSZ", "SIGCHLD"):
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    argv = [str(a) for a in request["argv"]]
    try:
        os.execvpe(argv[0], argv, {str(k): str(v) for k, v in request["env"].items()})
    except FileNotFoundError:
        _fail(NOT_FOUND, f"cannot start {argv[0]}: no such command")
    except OSError as exc:
        _fail(START_FAILED, f"cannot start {argv[0]}: {exc.strerror}")


def _spawn(request: dict[str, Any]) -> dict[str, Any]:
    told, report = os.pipe()  # both close-on-exec: end of file once the command runs
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(told)
        os.close(report)
        return {"id": request.get("id"), "error": f"fork failed: {exc.strerror}"}
    if pid == 0:
        try:
            os.close(told)
            _child(request, report)
        finally:
            os._exit(START_FAILED)  # only reached if _child raised something unexpected
    os.close(report)
    failure = _read_all(told)
    if failure:
        # Reaped here, so the serve loop never reports an exit of a pod the server never had.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return {"id": request["id"], "error": failure, "fence": True}
    return {"id": request["id"], "pid": pid}


def _read_all(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def _reap() -> list[dict[str, Any]]:
    ended: list[dict[str, Any]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def serve(sock: socket.socket) -> None:
    """Answer spawn requests until the server closes its end."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    pending = b""

    def send(message: dict[str, Any]) -> None:
        sock.sendall(json.dumps(message).encode() + b"\n")

    while True:
        for key, _ in selector.select():
            if key.fileobj is sock:
                data = sock.recv(1 << 20)
                if not data:
                    return
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    send(_spawn(json.loads(line)))
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
        for message in _reap():
            send(message)


def main() -> int:
    _die_with_parent()
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.setblocking(True)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        serve(sock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
