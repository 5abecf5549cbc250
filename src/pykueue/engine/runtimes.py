"""How long a workload will run: its own limit, or what its LocalQueue's finished workloads took.

The start-time estimator (`pykueue.engine.forecast`) needs a running time for
every workload it plays forward. The sources, best first:

1. the workload's own limit, ``spec.maximumExecutionTimeSeconds`` (or the Job's
   ``activeDeadlineSeconds``, which the caller passes in the same way): the job
   cannot run longer, so it is the expected time and the top of the range;
2. what finished workloads of the same LocalQueue *and the same size* (all pods'
   requests) ran, from their quota reservation to their end, kept as the last
   ``window`` samples: the median is the expected time, the ``low``/``high``
   percentiles the range (jobs of one queue often differ in length with their size);
3. the same over the LocalQueue's workloads of every size, while that size has
   too few samples;
4. the same over every LocalQueue, while the workload's own has too few;
5. a default running time, named as such.

A running workload has already used part of its time. With a limit, what is
left is the limit minus the time run. With learned samples, it is the same
percentile among the samples longer than the time run so far (a job that has
outlived most of its peers is likely one of the long ones), minus that time;
when none is longer, it is due now.

Everything is in microseconds and pure: the caller says when workloads
finished, and passes ``now`` in.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pykueue.engine.workloads import Workload

SECOND = 1_000_000
MAX_EXECUTION_TIME = "maximumExecutionTimeSeconds"
ACTIVE_DEADLINE = "activeDeadlineSeconds"
DEFAULT_BASIS = "default"


@dataclass(frozen=True, slots=True)
class Settings:
    """The runtime model's choices (docs/estimates.md)."""

    window: int = 200  # finished samples kept per LocalQueue
    min_samples: int = 3  # fewer than this in a LocalQueue: use every queue's samples
    low_percentile: float = 0.1
    high_percentile: float = 0.9
    default_runtime: int = 3600 * SECOND  # nothing learned yet and no limit


@dataclass(frozen=True, slots=True)
class Runtime:
    """A running time with its range and where it came from."""

    expected: int
    low: int
    high: int
    basis: str

    def pick(self, which: str) -> int:
        return {"low": self.low, "expected": self.expected, "high": self.high}[which]


def size_of(wl: Workload) -> str:
    """A workload's size, for learning per size: all its pods' requests, summed per resource."""
    return ";".join(f"{resource}={value}" for resource, value in sorted(wl.total_requests().items()))


@dataclass(slots=True)
class Model:
    """Learned running times per LocalQueue (and size) plus the limits of the workloads that declare one."""

    settings: Settings = field(default_factory=Settings)
    # LocalQueue key ("namespace/name") -> the last `window` running times, oldest first.
    samples: dict[str, deque[int]] = field(default_factory=dict)
    # (LocalQueue key, size) -> the same, for workloads of that size only.
    sized: dict[tuple[str, str], deque[int]] = field(default_factory=dict)
    # Workload key -> (limit in microseconds, its source: MAX_EXECUTION_TIME or ACTIVE_DEADLINE).
    limits: dict[str, tuple[int, str]] = field(default_factory=dict)
    # Sorted copies of the windows, dropped on each new sample.
    _sorted: dict[object, list[int]] = field(default_factory=dict)
    _all: list[int] | None = None

    def copy(self) -> Model:
        """An independent copy (a forward run reads one while the live model keeps learning)."""
        samples = {key: deque(window, maxlen=window.maxlen) for key, window in self.samples.items()}
        sized = {key: deque(window, maxlen=window.maxlen) for key, window in self.sized.items()}
        return Model(self.settings, samples, sized, dict(self.limits))

    def learn(self, queue_key: str, ran: int, size: str = "") -> None:
        """A workload of ``queue_key`` (of ``size``, if known) finished after running ``ran`` microseconds."""
        if ran <= 0:
            return
        self._append(self.samples, queue_key, ran)
        if size:
            self._append(self.sized, (queue_key, size), ran)
        self._all = None

    def _append(self, windows: dict[Any, deque[int]], key: object, ran: int) -> None:
        window = windows.get(key)
        if window is None:
            window = windows[key] = deque(maxlen=self.settings.window)
        window.append(ran)
        self._sorted.pop(key, None)

    def set_limit(self, workload_key: str, seconds: int | None, source: str = MAX_EXECUTION_TIME) -> None:
        if seconds is None or seconds <= 0:
            self.limits.pop(workload_key, None)
        else:
            self.limits[workload_key] = (seconds * SECOND, source)

    def runtime(self, workload_key: str, queue_key: str, size: str = "") -> Runtime:
        """The running time of a workload that has not started."""
        learned = self._learned(queue_key, size)
        limit = self.limits.get(workload_key)
        if limit is not None:
            value, source = limit
            low = min(value, learned[1][0]) if learned is not None else value
            return Runtime(value, low, value, source)
        if learned is not None:
            basis, (low, expected, high) = learned
            return Runtime(expected, low, high, basis)
        value = self.settings.default_runtime
        return Runtime(value, value, value, DEFAULT_BASIS)

    def remaining(self, workload_key: str, queue_key: str, ran: int, which: str, size: str = "") -> int:
        """What is left of a workload that has run ``ran`` microseconds (``which``: low/expected/high)."""
        limit = self.limits.get(workload_key)
        if limit is not None:
            return max(limit[0] - ran, 0)
        found = self._values(queue_key, size)
        if found is None:
            return max(self.settings.default_runtime - ran, 0)
        values = found[1]
        longer = values[bisect.bisect_right(values, ran) :]
        if not longer:
            return 0
        return _percentile(longer, self._fraction(which)) - ran

    def _fraction(self, which: str) -> float:
        if which == "low":
            return self.settings.low_percentile
        if which == "high":
            return self.settings.high_percentile
        return 0.5

    def _window(self, windows: dict[Any, deque[int]], key: object) -> list[int] | None:
        values = self._sorted.get(key)
        if values is None:
            window = windows.get(key)
            if window is None or len(window) < self.settings.min_samples:
                return None
            values = self._sorted[key] = sorted(window)
        return values

    def _values(self, queue_key: str, size: str = "") -> tuple[str, list[int]] | None:
        """The samples to use, most specific first, and where they come from."""
        if size:
            values = self._window(self.sized, (queue_key, size))
            if values is not None:
                return f"of this size in {queue_key}", values
        values = self._window(self.samples, queue_key)
        if values is not None:
            return f"in {queue_key}", values
        if self._all is None:
            self._all = sorted(value for window in self.samples.values() for value in window)
        return ("in all queues", self._all) if len(self._all) >= self.settings.min_samples else None

    def _learned(self, queue_key: str, size: str = "") -> tuple[str, tuple[int, int, int]] | None:
        found = self._values(queue_key, size)
        if found is None:
            return None
        where, values = found
        figures = (
            _percentile(values, self.settings.low_percentile),
            _percentile(values, 0.5),
            _percentile(values, self.settings.high_percentile),
        )
        return f"learned p50 of {len(values)} finished {where}", figures

    def mean(self, queue_key: str) -> int:
        """The mean learned running time of a LocalQueue (the naive estimate's), else the default."""
        found = self._values(queue_key)
        return sum(found[1]) // len(found[1]) if found else self.settings.default_runtime


def _percentile(values: list[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted ``values``."""
    index = min(len(values) - 1, max(0, round(fraction * (len(values) - 1))))
    return values[index]
