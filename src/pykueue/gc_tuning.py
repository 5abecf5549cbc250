"""Python's garbage collector, set for a process that serves for hours: the controller and the server.

CPython collects its youngest generation every 700 net allocations of container
objects, and its oldest one whenever a quarter of the long-lived heap has been
promoted since the last full pass. A controller allocates a dict tree for every
watch event it decodes and keeps the newest one per object in its cache, so a
busy controller promotes its whole heap again and again and walks it each time:
on upstream's baseline shape at a fifth of its size that was 8.5 of the
controller's 45 CPU seconds (docs/decisions.md). Few of its objects form cycles,
so collecting rarely keeps little memory a while longer and saves most of that time.

``PYKUEUE_GC_THRESHOLDS="g0,g1,g2"`` overrides the thresholds (Python's own are
``700,10,10``); a bad value is an error that names the variable.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping

from pykueue.errors import PykueueError

ENV = "PYKUEUE_GC_THRESHOLDS"
# Youngest generation every 50,000 net allocations (a collection took about 80 ms in the
# fifth-scale run); the middle one every 20 of those; a full pass after 10 middle ones,
# and then only when the heap grew by a quarter (CPython's own rule).
SERVICE_THRESHOLDS = (50_000, 20, 10)


def thresholds(env: Mapping[str, str]) -> tuple[int, int, int]:
    """The thresholds to use: ``env``'s override, else `SERVICE_THRESHOLDS`."""
    text = env.get(ENV, "").strip()
    if not text:
        return SERVICE_THRESHOLDS
    parts = [part.strip() for part in text.split(",")]
    try:
        values = [int(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != 3 or any(value < 0 for value in values):
        raise PykueueError(f"{ENV}={text!r}: expected three whole numbers >= 0, as 50000,20,10")
    return values[0], values[1], values[2]


def tune_for_service(env: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """Set the collector's thresholds for a long-running process; returns what was set."""
    chosen = thresholds(os.environ if env is None else env)
    gc.set_threshold(*chosen)
    return chosen
