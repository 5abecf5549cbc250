"""The garbage collector's thresholds for long-running processes (pykueue.gc_tuning)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from pykueue import gc_tuning
from pykueue.errors import PykueueError


@pytest.fixture
def restored_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_without_an_override_the_service_thresholds_are_set(restored_thresholds: None) -> None:
    assert gc_tuning.tune_for_service({}) == gc_tuning.SERVICE_THRESHOLDS
    assert gc.get_threshold() == gc_tuning.SERVICE_THRESHOLDS
    # Far fewer young collections than CPython's default of 700.
    assert gc.get_threshold()[0] >= 10_000


def test_the_environment_overrides_them(restored_thresholds: None) -> None:
    chosen = gc_tuning.tune_for_service({gc_tuning.ENV: " 700, 10,10 "})
    assert chosen == (700, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("text", ["1,2", "a,b,c", "1,2,3,4", "5,-1,2"])
def test_a_bad_override_names_the_variable_and_changes_nothing(restored_thresholds: None, text: str) -> None:
    before = gc.get_threshold()
    with pytest.raises(PykueueError, match=gc_tuning.ENV):
        gc_tuning.tune_for_service({gc_tuning.ENV: text})
    assert gc.get_threshold() == before


def test_the_controller_command_reports_a_bad_override_before_connecting() -> None:
    env = {**os.environ, gc_tuning.ENV: "lots"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pykueue.cli.main import main; sys.argv[0] = 'pykueue'; main()",
            "controller",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"error: {gc_tuning.ENV}='lots'" in done.stderr
