"""`make run`: the demo shows admission, borrowing and a preemption within a minute."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

from .helpers import BIN, EXAMPLES, Server, kill_marked, shared_folder, wait_until


def test_the_demo_admits_borrows_and_preempts(tmp_path: Path) -> None:
    server = Server(tmp_path, None)
    log = tmp_path / "demo.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                str(BIN / "pykueue"),
                "up",
                "--demo",
                "--config",
                str(EXAMPLES / "config.yaml"),
                "--data",
                str(server.data),
                "--port",
                "0",
            ],
            env=server.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        text = lambda: log.read_text()  # noqa: E731
        wait_until(lambda: "Preempted research/job-train-big" in text(), timeout=60, interval=0.2)
        output = text()
        assert "pykueue is serving http://127.0.0.1:" in output and "admin token: pk_" in output
        assert "Admitted research/job-train-small" in output
        assert "Admitted research/job-train-big" in output and "(borrowing from the cohort)" in output
        assert "Pending research/job-eval" in output and "insufficient unused quota" in output
        wait_until(lambda: "Admitted product/job-launch-blocker" in text(), timeout=30, interval=0.2)
        wait_until(lambda: "research/train-big: stopping 1 pod(s)" in text(), timeout=30, interval=0.2)
    finally:
        process.kill()
        process.wait(timeout=30)
        kill_marked(server.db)
        shutil.rmtree(server.shared, ignore_errors=True)


class _Demo:
    """`up --demo` as a user runs it: no --data, so its folders are made in the temp folder."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [
                    str(BIN / "pykueue"),
                    "up",
                    "--demo",
                    "--config",
                    str(EXAMPLES / "config.yaml"),
                    "--port",
                    "0",
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: "admin token: pk_" in self.text(), timeout=60, interval=0.2)
        found = re.search(r"export PYKUEUE_SOCKET=(\S+)", self.text())
        assert found is not None, self.text()
        self.socket = Path(found.group(1))

    def text(self) -> str:
        if self.process.poll() is not None and "pykueue is serving" not in self.log.read_text():
            raise AssertionError(f"the demo exited: {self.log.read_text()}")
        return self.log.read_text()

    @property
    def data(self) -> Path:
        return self.socket.parent

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        kill_marked(self.data / "pykueue.db")


def test_the_demo_leaves_the_users_client_config_and_no_folders_behind(tmp_path: Path) -> None:
    temp = shared_folder()  # short: a Unix socket's path must fit in 108 bytes
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"), TMPDIR=str(temp))
    for name in ("PYKUEUE_SERVER", "PYKUEUE_TOKEN", "PYKUEUE_SOCKET"):
        env.pop(name, None)
    mine = tmp_path / "config" / "pykueue" / "client.json"
    mine.parent.mkdir(parents=True)
    saved = json.dumps({"server": "http://127.0.0.1:8642", "token": "pk_mine", "socket": "/run/mine.sock"})
    mine.write_text(saved)
    demos: list[_Demo] = []
    try:
        first = _Demo(env, tmp_path / "first.log")
        demos.append(first)
        wait_until(lambda: "Admitted research/job-train-small" in first.text(), timeout=60, interval=0.2)
        assert mine.read_text() == saved
        # The CLI reaches the demo with the socket it printed.
        listed = subprocess.run(
            [str(BIN / "pykueue"), "get", "clusterqueues"],
            env=dict(env, PYKUEUE_SOCKET=str(first.socket)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0 and "research" in listed.stdout, listed.stderr
        first.process.send_signal(signal.SIGINT)  # Ctrl-C
        assert first.process.wait(timeout=60) == 0
        assert sorted(temp.iterdir()) == [], "the demo's data and job folders are removed"

        # kill -9 leaves the folders; the next demo removes them once nothing of the old one runs.
        second = _Demo(env, tmp_path / "second.log")
        demos.append(second)
        second.process.kill()
        second.process.wait(timeout=30)
        second.cleanup()
        assert second.data.is_dir()
        third = _Demo(env, tmp_path / "third.log")
        demos.append(third)
        assert f"removed the folder of an earlier demo: {second.data}" in third.text()
        assert sorted(temp.iterdir()) == sorted([third.data, third.data.parent / f"{third.data.name}-work"])
        assert mine.read_text() == saved
    finally:
        for demo in demos:
            demo.cleanup()
        shutil.rmtree(temp, ignore_errors=True)
