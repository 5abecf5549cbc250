"""How good are estimated start times? Replay a trace, predict at submission, compare.

The replay is an ordinary simulation (`pykueue.sim.driver`) with two observers:

* at each finish, the job's running time (from its last admission to its end,
  what a controller sees) is learned for its LocalQueue, with the limit it declared
  (``max_execution``), as the live estimator learns from finished Workloads; a job's
  declared limit is known to the model from its submission, as the live estimator
  reads it from the pending Workload;
* at the submission of every ``every``-th job, right after it joined its queue
  and before the scheduler looked at it, two predictions of its start are made
  from the state at that instant:
  - the estimator's (`pykueue.engine.forecast`, the same code the server runs,
    with only what was learned so far: the trace's runtimes are never read);
  - the naive one: its position in its ClusterQueue's pending order times the
    mean learned running time of its LocalQueue.

Both are then compared with the job's actual first admission in the replay.
The replay's own decisions are not changed by the predictions: they run on
snapshots.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from pykueue.engine import forecast, runtimes
from pykueue.engine.state import State
from pykueue.sim import driver
from pykueue.sim.design import Design
from pykueue.sim.jobs import SECOND, Job


@dataclass(slots=True)
class Prediction:
    job: str
    submitted: int
    estimate: int | None  # None: the estimator gave none (beyond its horizon, or unknown)
    naive: int
    actual: int | None = None
    low: int | None = None
    high: int | None = None
    unknown: bool = False  # the estimator said "unknown" (it waits for an end nothing is known of)
    fresh: bool = False  # nothing was learned yet for the job's LocalQueue (nor over all)

    def covered(self) -> bool | None:
        """Did the range hold the actual start (None: no range or no start)?"""
        if self.actual is None or self.low is None or self.high is None:
            return None
        return self.low <= self.actual <= self.high


@dataclass(slots=True)
class Accuracy:
    """The predictions of one replay and their errors, in seconds."""

    trace: str
    jobs: int
    predictions: list[Prediction] = field(default_factory=list)

    def errors(self, which: str, phase: str = "all") -> list[float]:
        out = []
        for p in self._phase(phase):
            if p.actual is None:
                continue
            predicted = p.estimate if which == "estimate" else p.naive
            if predicted is None:
                continue
            out.append(abs(predicted - p.actual) / SECOND)
        return sorted(out)

    def _phase(self, phase: str) -> list[Prediction]:
        if phase == "all":
            return self.predictions
        return [p for p in self.predictions if p.fresh == (phase == "fresh")]

    def figures(self, phase: str = "all") -> dict[str, float]:
        """Errors in seconds of the predictions of ``phase`` (all, fresh or learned)."""
        chosen = self._phase(phase)
        waits = sorted((p.actual - p.submitted) / SECOND for p in chosen if p.actual is not None)
        estimate, naive = self.errors("estimate", phase), self.errors("naive", phase)
        ranged = [c for c in (p.covered() for p in chosen) if c is not None]
        return {
            "predictions": len(chosen),
            "without_estimate": sum(1 for p in chosen if p.estimate is None),
            "unknown": sum(1 for p in chosen if p.unknown),
            "median_wait": _quantile(waits, 0.5),
            "p90_wait": _quantile(waits, 0.9),
            "mean_error": statistics.fmean(estimate) if estimate else float("nan"),
            "median_error": _quantile(estimate, 0.5),
            "p90_error": _quantile(estimate, 0.9),
            "coverage": sum(ranged) / len(ranged) if ranged else float("nan"),
            "naive_mean_error": statistics.fmean(naive) if naive else float("nan"),
            "naive_median_error": _quantile(naive, 0.5),
            "naive_p90_error": _quantile(naive, 0.9),
        }


def replay(
    trace: str,
    design: Design,
    jobs: list[Job],
    every: int = 10,
    settings: runtimes.Settings | None = None,
    learn: bool = True,
) -> Accuracy:
    """Simulate ``jobs`` on ``design`` and predict the start of every ``every``-th job.

    ``learn=False`` predicts as a server that has just started would, all along: nothing
    finished is learned (declared limits are still read)."""
    loop = _ReplayLoop(design, design.check(jobs), driver.Options(seed=0), every, settings)
    loop.learning = learn
    loop.run()
    for prediction in loop.predictions.values():
        i = loop.index_of[prediction.job]
        prediction.actual = loop.first_start.get(i)
    return Accuracy(trace, len(jobs), list(loop.predictions.values()))


class _ReplayLoop(driver._Loop):
    """The simulator's loop, observed (see the module docstring)."""

    def __init__(
        self,
        design: Design,
        jobs: list[Job],
        options: driver.Options,
        every: int,
        settings: runtimes.Settings | None,
    ) -> None:
        super().__init__(design, jobs, options)
        self.every = every
        self.model = runtimes.Model(settings or runtimes.Settings())
        self.predictions: dict[int, Prediction] = {}
        self.first_start: dict[int, int] = {}
        self.learning = True

    def complete(self, now: int, dirty: set[str]) -> None:
        for at, _, i, epoch, exceeded in self.completions:
            # A job stopped at its limit did not finish: nothing to learn of its running time.
            if at == now and self.live[i].epoch == epoch and not exceeded:
                job = self.jobs[i]
                if self.learning:
                    self.model.learn(job.queue_key, now - self.live[i].started, job.max_execution)
                self.model.forget(job.key)
        super().complete(now, dirty)

    def submit(self, now: int, dirty: set[str]) -> None:
        first = self.next_job
        super().submit(now, dirty)
        for i in range(first, self.next_job):
            limit = self.jobs[i].max_execution
            if limit is not None:
                self.model.set_limit(self.jobs[i].key, limit // SECOND)
        sampled = [i for i in range(first, self.next_job) if i % self.every == 0]
        if not sampled:
            return
        keys = [self.jobs[i].key for i in sampled]
        estimates = forecast.estimate(forecast.snapshot(self.state), self.model, keys)
        for i, key in zip(sampled, keys, strict=True):
            found = estimates.get(key)
            known = found is not None and found.known
            naive = now + naive_position(self.state, key) * self.model.mean(self.jobs[i].queue_key)
            self.predictions[i] = Prediction(
                key,
                now,
                found.at if found is not None and known else None,
                naive,
                low=found.low if found is not None and known else None,
                high=found.high if found is not None and known else None,
                unknown=found is not None and not known,
                fresh=not self.model.has_learned(self.jobs[i].queue_key),
            )

    def admitted(self, i: int, now: int, dirty: set[str]) -> None:
        self.first_start.setdefault(i, now)
        super().admitted(i, now, dirty)


def naive_position(state: State, key: str) -> int:
    """How many workloads of its ClusterQueue are ahead of ``key`` in the order they would be tried."""
    wl = state.workloads[key]
    lq = state.local_queues.get(wl.queue_key)
    queue = state.queues.get(lq.cluster_queue) if lq is not None else None
    if queue is None:
        return 0
    ordered = [
        *sorted(queue.active(), key=queue.sort_key),
        *sorted(queue.inadmissible.values(), key=queue.sort_key),
    ]
    return next((index for index, other in enumerate(ordered) if other.key == key), 0)


def _quantile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]
