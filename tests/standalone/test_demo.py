"""`make run`: the demo shows admission, borrowing and a preemption within a minute."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .helpers import BIN, EXAMPLES, Server, kill_marked, wait_until


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
