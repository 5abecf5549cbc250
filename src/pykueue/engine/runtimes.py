"""How long a workload will run: what its LocalQueue's finished workloads took, within its limit.

The start-time estimator (`pykueue.engine.forecast`) needs a running time for
every workload it plays forward. The sources:

1. the workload's own limit, ``spec.maximumExecutionTimeSeconds`` (or the Job's
   ``activeDeadlineSeconds``, which the caller passes in the same way), is an
   *upper bound*: the job cannot run longer, and most jobs end well before it.
   Within it the expected time is the limit times the share of their limits that
   finished workloads with limits used (learned per LocalQueue, else over all);
   without such shares, what finished workloads ran, capped by the limit; with
   nothing learned, half the limit, in a range from now to the limit;
2. without a limit, what finished workloads of the same LocalQueue ran (from their
   quota reservation to their end), kept per LocalQueue as the last ``window``
   samples: the median is the expected time, the ``low``/``high`` percentiles the
   range; the same over every LocalQueue while its own has too few samples;
3. nothing known: the running time is *unknown* (basis `UNKNOWN_BASIS`). The forward
   run still needs a number (``default_runtime``), but a start that waits for such
   a workload's end is shown as unknown rather than as a made-up time.

A running workload has already used part of its time. What is left is the same
percentile among the samples longer than the time run so far (a job that has
outlived most of its peers is likely one of the long ones), minus that time;
when none is longer, it is due now. With a limit, never beyond the limit.

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
# The basis of a running time nothing is known of: no limit, nothing finished yet.
UNKNOWN_BASIS = "unknown: nothing has finished yet and no time limit is declared"


@dataclass(frozen=True, slots=True)
class Settings:
    """The runtime model's choices (docs/estimates.md)."""

    window: int = 200  # finished samples kept per LocalQueue
    min_samples: int = 3  # fewer than this in a LocalQueue: use every queue's samples
    low_percentile: float = 0.1
    high_percentile: float = 0.9
    # Played for a workload nothing is known of (its start is reported as unknown).
    default_runtime: int = 3600 * SECOND


@dataclass(frozen=True, slots=True)
class Runtime:
    """A running time with its range and where it came from."""

    expected: int
    low: int
    high: int
    basis: str

    def pick(self, which: str) -> int:
        return {"low": self.low, "expected": self.expected, "high": self.high}[which]

    @property
    def known(self) -> bool:
        return self.basis != UNKNOWN_BASIS


@dataclass(slots=True)
class Model:
    """Learned running times per LocalQueue plus the limits of the workloads that declare one."""

    settings: Settings = field(default_factory=Settings)
    # LocalQueue key ("namespace/name") -> the last `window` running times, oldest first.
    samples: dict[str, deque[int]] = field(default_factory=dict)
    # Workload key -> (limit in microseconds, its source: MAX_EXECUTION_TIME or ACTIVE_DEADLINE).
    limits: dict[str, tuple[int, str]] = field(default_factory=dict)
    # LocalQueue key -> the last `window` shares of their limits (ran / limit, per mille) that
    # finished workloads with a declared limit used, oldest first.
    shares: dict[str, deque[int]] = field(default_factory=dict)
    _sorted: dict[str, list[int]] = field(default_factory=dict)  # cache, dropped on each new sample
    _all: list[int] | None = None
    _sorted_shares: dict[str, list[int] | None] = field(default_factory=dict)  # cache, as _sorted

    def copy(self) -> Model:
        """An independent copy (a forward run reads one while the live model keeps learning)."""
        samples = {key: deque(window, maxlen=window.maxlen) for key, window in self.samples.items()}
        shares = {key: deque(window, maxlen=window.maxlen) for key, window in self.shares.items()}
        return Model(self.settings, samples, dict(self.limits), shares)

    def learn(self, queue_key: str, ran: int, limit: int | None = None) -> None:
        """A workload of ``queue_key`` finished after running ``ran`` microseconds (``limit``:
        the limit it declared, in microseconds, if any)."""
        if ran <= 0:
            return
        window = self.samples.get(queue_key)
        if window is None:
            window = self.samples[queue_key] = deque(maxlen=self.settings.window)
        window.append(ran)
        self._sorted.pop(queue_key, None)
        self._all = None
        if limit is not None and limit > 0:
            shares = self.shares.get(queue_key)
            if shares is None:
                shares = self.shares[queue_key] = deque(maxlen=self.settings.window)
            shares.append(min(1000, ran * 1000 // limit))
            self._sorted_shares.clear()

    def set_limit(self, workload_key: str, seconds: int | None, source: str = MAX_EXECUTION_TIME) -> None:
        if seconds is None or seconds <= 0:
            self.limits.pop(workload_key, None)
        else:
            self.limits[workload_key] = (seconds * SECOND, source)

    def forget(self, workload_key: str) -> None:
        self.limits.pop(workload_key, None)

    def runtime(self, workload_key: str, queue_key: str) -> Runtime:
        """The running time of a workload that has not started."""
        limit = self.limits.get(workload_key)
        if limit is not None:
            return self._within_limit(queue_key, *limit)
        learned = self._learned(queue_key)
        if learned is not None:
            basis, (low, expected, high) = learned
            return Runtime(expected, low, high, basis)
        value = self.settings.default_runtime
        return Runtime(value, value, value, UNKNOWN_BASIS)

    def _within_limit(self, queue_key: str, limit: int, source: str) -> Runtime:
        """A limit is an upper bound: the expected time is the share of it that finished
        workloads used, or what they ran, or (nothing learned) half of it."""
        shares = self._shares(queue_key)
        if shares is not None:
            low, mid, high = (
                _percentile(shares, f)
                for f in (self.settings.low_percentile, 0.5, self.settings.high_percentile)
            )
            return Runtime(
                limit * mid // 1000,
                limit * low // 1000,
                limit * high // 1000,
                f"{source} x {mid / 10:g}% (the share of their limits {len(shares)} finished used)",
            )
        learned = self._learned(queue_key)
        if learned is not None:
            basis, (low, expected, high) = learned
            return Runtime(
                min(expected, limit), min(low, limit), min(high, limit), f"{basis}, within {source}"
            )
        return Runtime(limit // 2, 0, limit, f"{source} as an upper bound (nothing finished yet)")

    def remaining(self, workload_key: str, queue_key: str, ran: int, which: str) -> int:
        """What is left of a workload that has run ``ran`` microseconds (``which``: low/expected/high)."""
        limit = self.limits.get(workload_key)
        if limit is not None:
            planned = self._within_limit(queue_key, *limit).pick(which)
            if planned > ran:
                return planned - ran
            # It outlived what was expected of it: somewhere before its limit.
            left = max(limit[0] - ran, 0)
            return {"low": 0, "expected": left // 2, "high": left}[which]
        values = self._values(queue_key)
        if values is None:
            return max(self.settings.default_runtime - ran, 0)
        longer = values[bisect.bisect_right(values, ran) :]
        if not longer:
            return 0
        return _percentile(longer, self._fraction(which)) - ran

    def _shares(self, queue_key: str) -> list[int] | None:
        if queue_key not in self._sorted_shares:
            self._sorted_shares[queue_key] = self._sorted_shares_of(queue_key)
        return self._sorted_shares[queue_key]

    def _sorted_shares_of(self, queue_key: str) -> list[int] | None:
        own = self.shares.get(queue_key)
        if own is not None and len(own) >= self.settings.min_samples:
            return sorted(own)
        every = sorted(share for window in self.shares.values() for share in window)
        return every if len(every) >= self.settings.min_samples else None

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

    def has_learned(self, queue_key: str) -> bool:
        """Whether running times are known for ``queue_key`` (its own, or over every queue)."""
        return self._values(queue_key) is not None

    def mean(self, queue_key: str) -> int:
        """The mean learned running time (the naive estimate's), else the default."""
        values = self._values(queue_key)
        return sum(values) // len(values) if values else self.settings.default_runtime


def _percentile(values: list[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted ``values``."""
    index = min(len(values) - 1, max(0, round(fraction * (len(values) - 1))))
    return values[index]
