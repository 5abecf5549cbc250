"""How long a workload will run: its own limit, or what its LocalQueue's finished workloads took.

The start-time estimator (`pykueue.engine.forecast`) needs a running time for
every workload it plays forward. The sources, best first:

1. the workload's own limit, ``spec.maximumExecutionTimeSeconds`` (or the Job's
   ``activeDeadlineSeconds``, which the caller passes in the same way): the job
   cannot run longer, so it is the expected time and the top of the range;
2. what finished workloads of the same LocalQueue ran (from their quota
   reservation to their end), kept per LocalQueue as the last ``window`` samples:
   the median is the expected time, the ``low``/``high`` percentiles the range;
3. the same over every LocalQueue, while the workload's own has too few samples;
4. a default running time, named as such.

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


@dataclass(slots=True)
class Model:
    """Learned running times per LocalQueue plus the limits of the workloads that declare one."""

    settings: Settings = field(default_factory=Settings)
    # LocalQueue key ("namespace/name") -> the last `window` running times, oldest first.
    samples: dict[str, deque[int]] = field(default_factory=dict)
    # Workload key -> (limit in microseconds, its source: MAX_EXECUTION_TIME or ACTIVE_DEADLINE).
    limits: dict[str, tuple[int, str]] = field(default_factory=dict)
    _sorted: dict[str, list[int]] = field(default_factory=dict)  # cache, dropped on each new sample
    _all: list[int] | None = None

    def copy(self) -> Model:
        """An independent copy (a forward run reads one while the live model keeps learning)."""
        samples = {key: deque(window, maxlen=window.maxlen) for key, window in self.samples.items()}
        return Model(self.settings, samples, dict(self.limits))

    def learn(self, queue_key: str, ran: int) -> None:
        """A workload of ``queue_key`` finished after running ``ran`` microseconds."""
        if ran <= 0:
            return
        window = self.samples.get(queue_key)
        if window is None:
            window = self.samples[queue_key] = deque(maxlen=self.settings.window)
        window.append(ran)
        self._sorted.pop(queue_key, None)
        self._all = None

    def set_limit(self, workload_key: str, seconds: int | None, source: str = MAX_EXECUTION_TIME) -> None:
        if seconds is None or seconds <= 0:
            self.limits.pop(workload_key, None)
        else:
            self.limits[workload_key] = (seconds * SECOND, source)

    def forget(self, workload_key: str) -> None:
        self.limits.pop(workload_key, None)

    def runtime(self, workload_key: str, queue_key: str) -> Runtime:
        """The running time of a workload that has not started."""
        learned = self._learned(queue_key)
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

    def remaining(self, workload_key: str, queue_key: str, ran: int, which: str) -> int:
        """What is left of a workload that has run ``ran`` microseconds (``which``: low/expected/high)."""
        limit = self.limits.get(workload_key)
        if limit is not None:
            return max(limit[0] - ran, 0)
        values = self._values(queue_key)
        if values is None:
            return max(self.settings.default_runtime - ran, 0)
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

    def _values(self, queue_key: str) -> list[int] | None:
        own = self._sorted.get(queue_key)
        if own is None:
            window = self.samples.get(queue_key)
            if window is not None and len(window) >= self.settings.min_samples:
                own = self._sorted[queue_key] = sorted(window)
        if own is not None:
            return own
        if self._all is None:
            self._all = sorted(value for window in self.samples.values() for value in window)
        return self._all if len(self._all) >= self.settings.min_samples else None

    def _learned(self, queue_key: str) -> tuple[str, tuple[int, int, int]] | None:
        values = self._values(queue_key)
        if values is None:
            return None
        own = queue_key in self._sorted
        where = f"in {queue_key}" if own else "in all queues"
        figures = (
            _percentile(values, self.settings.low_percentile),
            _percentile(values, 0.5),
            _percentile(values, self.settings.high_percentile),
        )
        return f"learned p50 of {len(values)} finished {where}", figures

    def mean(self, queue_key: str) -> int:
        """The mean learned running time (the naive estimate's), else the default."""
        values = self._values(queue_key)
        return sum(values) // len(values) if values else self.settings.default_runtime


def _percentile(values: list[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted ``values``."""
    index = min(len(values) - 1, max(0, round(fraction * (len(values) - 1))))
    return values[index]
