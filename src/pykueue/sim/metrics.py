"""What a simulation records, and the JSON summary made from it.

The driver tells a `Recorder` about every arrival, admission, preemption and
completion; the recorder keeps per-job times as flat lists and, per
ClusterQueue, a change series (time, pending, running, usage and borrowed
amount of the *primary resource*) plus exact time integrals of usage per
resource. Nothing is sampled on a fixed tick, so every figure is exact for the
events simulated; plots and the fairness index read the change series on a
grid afterwards.

Definitions (docs/simulator.md has them with examples):

* *wait* of a job: from submission to its first admission; *queued time*:
  every interval it spent pending, including after preemptions.
* *time to admission* (upstream checker): from creation to its last admission,
  averaged per class in whole milliseconds, as upstream's recorder does.
* *ClusterQueue class usage* (upstream checker): sum over the class's queues of
  the time integral of the primary resource in use, divided by the sum of their
  nominal quotas times the monitored time (start to the class's last change).
* *lost work*: running time thrown away by preemptions (back to the last
  checkpoint), times what the job held, in resource-hours; GPU-hours for GPUs.
* *fairness*: Jain's index over the ClusterQueues that have pending work, of
  usage divided by entitlement (nominal quota of the primary resource times
  fair-sharing weight).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pykueue.engine.state import State
from pykueue.sim.jobs import SECOND, Job

HOUR = 3600 * SECOND
GRID_POINTS = 240
GPU_HINTS = ("gpu",)


def primary_resource(state: State) -> str:
    """The resource reports focus on: a GPU if any quota has one, else cpu, else the first one."""
    resources: list[str] = []
    for cq in state.cluster_queues.values():
        for _, resource in cq.quotas:
            if resource not in resources:
                resources.append(resource)
    for resource in resources:
        if any(hint in resource.lower() for hint in GPU_HINTS):
            return resource
    if "cpu" in resources:
        return "cpu"
    return resources[0] if resources else "cpu"


@dataclass(frozen=True, slots=True)
class Preemption:
    """One preemption a job suffered: when, by which job (index, -1 unknown), upstream's reason."""

    time: int
    by: int
    reason: str
    lost: int  # running time thrown away, microseconds


@dataclass(slots=True)
class _Cell:
    count: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    lost: int = 0  # primary resource milli-units x microseconds


@dataclass(slots=True)
class QueueSeries:
    """One ClusterQueue's change series and integrals."""

    name: str
    cohort: str
    cq_class: str
    nominal: dict[str, int]  # per resource, summed over flavors (milli-units)
    weight: float
    times: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)  # primary resource, milli-units
    borrowed: list[int] = field(default_factory=list)
    n_pending: int = 0
    n_running: int = 0
    usage: dict[str, int] = field(default_factory=dict)  # current, per resource
    integral: dict[str, int] = field(default_factory=dict)  # milli-units x microseconds
    borrowed_integral: int = 0
    last_change: int = 0
    max_pending: int = 0


class Recorder:
    """Collects a run's facts; `summary` turns them into the JSON document."""

    def __init__(self, state: State, jobs: list[Job], cq_of: list[str], classes: dict[str, str]) -> None:
        self.jobs = jobs
        self.cq_of = cq_of
        self.primary = primary_resource(state)
        n = len(jobs)
        self.first_admit = [-1] * n
        self.last_admit = [-1] * n
        self.finish = [-1] * n
        self.evictions = [0] * n
        self.queued = [0] * n  # total pending time so far (closed intervals)
        self.pending_since = [-1] * n
        self.lost_time = [0] * n
        self.exceeded_at = [-1] * n  # stopped at its maximum execution time (never finished)
        self.exceeded_spent: dict[str, dict[str, int]] = {}  # cq -> resource -> milli x microseconds
        self.lost: dict[str, dict[str, int]] = {}  # cq -> resource -> milli x microseconds
        self.preemptions: dict[str, int] = {}
        self.preempted_by: dict[int, list[Preemption]] = {}  # victim job -> each preemption it suffered
        self.matrix: dict[tuple[str, str], _Cell] = {}  # (victim CQ, preemptor CQ) -> what it cost
        self.end = 0
        self.nominal_fr: dict[str, dict[tuple[str, str], int]] = {}
        self.queues: dict[str, QueueSeries] = {}
        self.cohort_nominal: dict[str, int] = {}  # quota Cohort objects hold themselves, per resource
        for cohort in state.cohorts.values():
            for (_, resource), quota in cohort.quotas.items():
                self.cohort_nominal[resource] = self.cohort_nominal.get(resource, 0) + quota.nominal
        for name, cq in state.cluster_queues.items():
            nominal: dict[str, int] = {}
            for (_, resource), quota in cq.quotas.items():
                nominal[resource] = nominal.get(resource, 0) + quota.nominal
            self.nominal_fr[name] = {fr: q.nominal for fr, q in cq.quotas.items()}
            # a weight counts in the entitlement only where the engine reads it
            weight = cq.fair_weight if state.config.fair_sharing.enable else 1.0
            series = QueueSeries(name, cq.cohort, classes.get(name, name), nominal, weight)
            self.queues[name] = series
            self._append(series, 0)

    # ------------------------------------------------------------- events

    def arrived(self, index: int, now: int) -> None:
        self.pending_since[index] = now
        series = self.queues[self.cq_of[index]]
        series.n_pending += 1
        series.max_pending = max(series.max_pending, series.n_pending)

    def admitted(self, index: int, now: int) -> None:
        if self.first_admit[index] < 0:
            self.first_admit[index] = now
        self.last_admit[index] = now
        self.queued[index] += now - self.pending_since[index]
        self.pending_since[index] = -1
        series = self.queues[self.cq_of[index]]
        series.n_pending -= 1
        series.n_running += 1

    def preempted(
        self, index: int, now: int, lost: int, holding: dict[str, int], by: int = -1, reason: str = ""
    ) -> None:
        self.evictions[index] += 1
        self.pending_since[index] = now
        self.lost_time[index] += lost
        cq = self.cq_of[index]
        self.preemptions[cq] = self.preemptions.get(cq, 0) + 1
        bucket = self.lost.setdefault(cq, {})
        for resource, value in holding.items():
            bucket[resource] = bucket.get(resource, 0) + value * lost
        self.preempted_by.setdefault(index, []).append(Preemption(now, by, reason, lost))
        cell = self.matrix.setdefault((cq, self.cq_of[by] if by >= 0 else ""), _Cell())
        cell.count += 1
        cell.reasons[reason] = cell.reasons.get(reason, 0) + 1
        cell.lost += holding.get(self.primary, 0) * lost
        series = self.queues[cq]
        series.n_running -= 1
        series.n_pending += 1
        series.max_pending = max(series.max_pending, series.n_pending)

    def finished(self, index: int, now: int) -> None:
        self.finish[index] = now
        self.queues[self.cq_of[index]].n_running -= 1

    def exceeded(self, index: int, now: int, spent: dict[str, int]) -> None:
        """Deactivated at its maximum execution time; ``spent``: what its runs held, all thrown away."""
        self.exceeded_at[index] = now
        cq = self.cq_of[index]
        bucket = self.exceeded_spent.setdefault(cq, {})
        for resource, value in spent.items():
            bucket[resource] = bucket.get(resource, 0) + value
        self.queues[cq].n_running -= 1

    def settled(self, state: State, now: int, dirty: set[str]) -> None:
        """Sample the queues touched at ``now`` after the scheduler settled."""
        self.end = max(self.end, now)
        for name in dirty:
            series = self.queues[name]
            usage: dict[str, int] = {}
            borrowed = 0
            nominal = self.nominal_fr[name]
            for (flavor, resource), value in state.cq_usage.get(name, {}).items():
                usage[resource] = usage.get(resource, 0) + value
                if resource == self.primary:
                    borrowed += max(0, value - nominal.get((flavor, resource), 0))
            elapsed = now - series.last_change
            if elapsed:
                for resource, value in series.usage.items():
                    series.integral[resource] = series.integral.get(resource, 0) + value * elapsed
                series.borrowed_integral += series.borrowed[-1] * elapsed
            series.usage = usage
            series.last_change = now
            self._append(series, now, usage.get(self.primary, 0), borrowed)

    @staticmethod
    def _append(series: QueueSeries, now: int, used: int = 0, borrowed: int = 0) -> None:
        if series.times and series.times[-1] == now:
            series.pending[-1], series.running[-1] = series.n_pending, series.n_running
            series.used[-1], series.borrowed[-1] = used, borrowed
            return
        series.times.append(now)
        series.pending.append(series.n_pending)
        series.running.append(series.n_running)
        series.used.append(used)
        series.borrowed.append(borrowed)

    # ------------------------------------------------------------ reading

    def grid(self) -> list[int]:
        end = max(self.end, 1)
        return [end * k // (GRID_POINTS - 1) for k in range(GRID_POINTS)]

    @staticmethod
    def on_grid(series: QueueSeries, values: list[int], grid: list[int]) -> list[int]:
        """The piecewise-constant ``values`` of a series read at each grid time."""
        result = []
        position = 0
        last = len(series.times) - 1
        for moment in grid:
            while position < last and series.times[position + 1] <= moment:
                position += 1
            result.append(values[position])
        return result

    def fairness(self, grid: list[int]) -> list[float | None]:
        """Jain's index of weighted shares at each grid time (None when nobody waits)."""
        nominals = [s.nominal.get(self.primary, 0) for s in self.queues.values()]
        positive = [n for n in nominals if n > 0]
        fallback = sum(positive) / len(positive) if positive else 1.0
        columns = []
        for series in self.queues.values():
            entitled = (series.nominal.get(self.primary, 0) or fallback) * series.weight
            columns.append(
                (
                    self.on_grid(series, series.pending, grid),
                    self.on_grid(series, series.used, grid),
                    entitled,
                )
            )
        result: list[float | None] = []
        for k in range(len(grid)):
            shares = [
                used[k] / entitled for pending, used, entitled in columns if pending[k] > 0 and entitled > 0
            ]
            result.append(jain(shares))
        return result

    def waits(self, indexes: list[int]) -> dict[str, Any]:
        values = sorted(
            self.first_admit[i] - self.jobs[i].submit for i in indexes if self.first_admit[i] >= 0
        )
        return distribution(values)

    def to_last_admission(self, indexes: list[int]) -> dict[str, Any]:
        """Submission to the last admission: the wait plus every wait after a preemption."""
        return distribution(
            sorted(self.last_admit[i] - self.jobs[i].submit for i in indexes if self.last_admit[i] >= 0)
        )

    def completion_delay(self, index: int) -> int:
        """How much later than ``submit + runtime`` the job finished (-1: it never did)."""
        if self.finish[index] < 0:
            return -1
        job = self.jobs[index]
        return self.finish[index] - job.submit - job.runtime

    def completion_delays(self, indexes: list[int]) -> dict[str, Any]:
        return distribution(sorted(self.completion_delay(i) for i in indexes if self.finish[i] >= 0))

    def preemption_table(self) -> list[dict[str, Any]]:
        """Victim ClusterQueue x preemptor ClusterQueue: count, upstream's reasons, lost hours."""
        return [
            {
                "victim": victim,
                "preemptor": preemptor,
                "count": cell.count,
                "reasons": dict(sorted(cell.reasons.items())),
                "lostResourceHours": _hours(cell.lost),
            }
            for (victim, preemptor), cell in sorted(self.matrix.items())
        ]

    def summary(
        self, design: str, source: str, seed: int, notes: list[str], model: dict[str, str]
    ) -> dict[str, Any]:
        return _summary(self, design, source, seed, notes, model)


def jain(values: list[float]) -> float | None:
    if not values:
        return None
    squares = sum(v * v for v in values)
    if squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def percentile(values: list[int], fraction: float) -> int:
    """Nearest-rank percentile of sorted values."""
    rank = max(1, math.ceil(fraction * len(values)))
    return values[rank - 1]


def distribution(values: list[int]) -> dict[str, Any]:
    """Count, mean and percentiles of sorted microsecond values, in seconds."""
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "mean": _seconds(sum(values) / len(values)),
        "p50": _seconds(percentile(values, 0.5)),
        "p90": _seconds(percentile(values, 0.9)),
        "p99": _seconds(percentile(values, 0.99)),
        "max": _seconds(values[-1]),
    }


def _seconds(micros: float) -> float:
    return round(micros / SECOND, 3)


def _units(milli: float) -> float:
    return round(milli / 1000, 4)


def _hours(milli_micros: float) -> float:
    return round(milli_micros / 1000 / HOUR, 4)


def _summary(
    rec: Recorder, design: str, source: str, seed: int, notes: list[str], model: dict[str, str]
) -> dict[str, Any]:
    by_cq: dict[str, list[int]] = {name: [] for name in rec.queues}
    by_class: dict[str, list[int]] = {}
    for i, job in enumerate(rec.jobs):
        by_cq[rec.cq_of[i]].append(i)
        by_class.setdefault(job.job_class, []).append(i)
    demand = _demand(rec)
    capacity = {
        r: sum(s.nominal.get(r, 0) for s in rec.queues.values()) + rec.cohort_nominal.get(r, 0)
        for r in demand
    }
    fairness = [value for value in rec.fairness(rec.grid()) if value is not None]
    return {
        "format": 1,
        "design": design,
        "input": source,
        "seed": seed,
        "model": model,
        "notes": notes,
        "totals": _totals(rec, demand, capacity),
        "ideal": _ideal(rec, demand, capacity),
        "checker": _checker(rec, by_class, rec.end),
        "clusterQueues": _queue_figures(rec, by_cq),
        "classes": _class_figures(rec, by_class),
        "fairness": {
            "index": "Jain's index of weighted shares among ClusterQueues with pending work",
            "mean": round(sum(fairness) / len(fairness), 4) if fairness else None,
            "min": round(min(fairness), 4) if fairness else None,
        },
        "preemptionsByPreemptor": rec.preemption_table(),
        "unfinishedJobs": [rec.jobs[i].key for i in range(len(rec.jobs)) if rec.finish[i] < 0][:100],
    }


def _demand(rec: Recorder) -> dict[str, int]:
    """Resource x time every job asks for (its requests for its whole runtime)."""
    demand: dict[str, int] = {}
    for job in rec.jobs:
        for resource, value in job.total_requests().items():
            demand[resource] = demand.get(resource, 0) + value * job.runtime
    return demand


def _summed(buckets: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for bucket in buckets:
        for resource, value in bucket.items():
            total[resource] = total.get(resource, 0) + value
    return total


def _totals(rec: Recorder, demand: dict[str, int], capacity: dict[str, int]) -> dict[str, Any]:
    n, end = len(rec.jobs), rec.end
    used = {r: sum(s.integral.get(r, 0) for s in rec.queues.values()) for r in demand}
    finished = sum(1 for value in rec.finish if value >= 0)
    everyone = list(range(n))
    return {
        "jobs": n,
        "admitted": sum(1 for value in rec.first_admit if value >= 0),
        "finished": finished,
        "unfinished": n - finished,
        "preemptions": sum(rec.evictions),
        "makespanSeconds": _seconds(end),
        "primaryResource": rec.primary,
        "demandResourceHours": {r: _hours(v) for r, v in sorted(demand.items())},
        "usedResourceHours": {r: _hours(v) for r, v in sorted(used.items())},
        "lostResourceHours": {r: _hours(v) for r, v in sorted(_summed(rec.lost.values()).items())},
        "exceededMaximumExecutionTime": sum(1 for value in rec.exceeded_at if value >= 0),
        "exceededResourceHours": {
            r: _hours(v) for r, v in sorted(_summed(rec.exceeded_spent.values()).items())
        },
        "nominalCapacity": {r: _units(v) for r, v in sorted(capacity.items())},
        "utilisationPercent": {
            r: round(100 * used[r] / (capacity[r] * end), 2) if capacity.get(r) and end else None
            for r in sorted(demand)
        },
        "wait": rec.waits(everyone),
        "timeToLastAdmission": rec.to_last_admission(everyone),
        "completionDelay": rec.completion_delays(everyone),
    }


def _ideal(rec: Recorder, demand: dict[str, int], capacity: dict[str, int]) -> dict[str, Any]:
    end = rec.end
    ideal_end = max(
        [max((job.submit + job.runtime for job in rec.jobs), default=0)]
        + [demand[r] // capacity[r] for r in demand if capacity.get(r)]
    )
    return {
        "makespanSeconds": _seconds(ideal_end),
        "note": "the makespan if the whole nominal capacity ran the demand with no gap: "
        "max(last submission + its runtime, demand / capacity)",
        "demandOverCapacitySeconds": {
            r: _seconds(demand[r] / capacity[r]) for r in sorted(demand) if capacity.get(r)
        },
        "usagePercentAtSimulatedMakespan": {
            r: round(100 * demand[r] / (capacity[r] * end), 2) if capacity.get(r) and end else None
            for r in sorted(demand)
        },
    }


def _queue_figures(rec: Recorder, by_cq: dict[str, list[int]]) -> dict[str, Any]:
    caused: dict[str, int] = {}
    caused_lost: dict[str, int] = {}
    for (_, preemptor), cell in rec.matrix.items():
        caused[preemptor] = caused.get(preemptor, 0) + cell.count
        caused_lost[preemptor] = caused_lost.get(preemptor, 0) + cell.lost
    return {
        name: _queue_figure(rec, name, series, by_cq[name], caused.get(name, 0), caused_lost.get(name, 0))
        for name, series in rec.queues.items()
    }


def _queue_figure(
    rec: Recorder, name: str, series: QueueSeries, indexes: list[int], caused: int, caused_lost: int
) -> dict[str, Any]:
    primary, window, jobs = rec.primary, rec.end, rec.jobs
    nominal = series.nominal.get(primary, 0)
    return {
        "cohort": series.cohort,
        "class": series.cq_class,
        "jobs": len(indexes),
        "finished": sum(1 for i in indexes if rec.finish[i] >= 0),
        "nominal": {r: _units(v) for r, v in sorted(series.nominal.items())},
        "averageUsage": {
            r: _units(v / window) if window else 0.0 for r, v in sorted(series.integral.items())
        },
        "averageUsagePercentOfNominal": round(100 * series.integral.get(primary, 0) / (nominal * window), 2)
        if nominal and window
        else None,
        "averageBorrowed": _units(series.borrowed_integral / window) if window else 0.0,
        "maxPending": series.max_pending,
        "wait": rec.waits(indexes),
        "timeToLastAdmission": rec.to_last_admission(indexes),
        "completionDelay": rec.completion_delays(indexes),
        "preemptions": rec.preemptions.get(name, 0),
        "preemptionsCaused": caused,
        "lostResourceHours": {r: _hours(v) for r, v in sorted(rec.lost.get(name, {}).items())},
        "lostResourceHoursCaused": _hours(caused_lost),
        "exceededMaximumExecutionTime": sum(1 for i in indexes if rec.exceeded_at[i] >= 0),
        "usedPrimaryHours": _hours(series.integral.get(primary, 0)),
        "entitledPrimaryHours": _hours(nominal * window),
        "demandPrimaryHours": _hours(
            sum(jobs[i].total_requests().get(primary, 0) * jobs[i].runtime for i in indexes)
        ),
    }


def _class_figures(rec: Recorder, by_class: dict[str, list[int]]) -> dict[str, Any]:
    return {
        cls: {
            "jobs": len(indexes),
            "priorities": sorted({rec.jobs[i].priority for i in indexes}),
            "wait": rec.waits(indexes),
            "timeToLastAdmission": rec.to_last_admission(indexes),
            "completionDelay": rec.completion_delays(indexes),
        }
        for cls, indexes in sorted(by_class.items())
    }


def _checker(rec: Recorder, by_class: dict[str, list[int]], end: int) -> dict[str, Any]:
    """Upstream's checker figures: wall time, usage per ClusterQueue class, time to admission per class."""
    cq_classes: dict[str, dict[str, Any]] = {}
    for series in rec.queues.values():
        group = cq_classes.setdefault(series.cq_class, {"used": 0, "nominal": 0, "last": 0})
        group["used"] += series.integral.get(rec.primary, 0)
        group["nominal"] += series.nominal.get(rec.primary, 0)
        group["last"] = max(group["last"], series.last_change)
    usage = {}
    for cls, group in sorted(cq_classes.items()):
        elapsed = group["last"]
        percent = 100 * group["used"] / (group["nominal"] * elapsed) if group["nominal"] and elapsed else None
        usage[cls] = {
            "usagePercent": round(percent, 2) if percent is not None else None,
            "resourceUsedUnitSeconds": round(group["used"] / 1000 / SECOND, 3),
            "nominalQuota": _units(group["nominal"]),
            "monitoredSeconds": _seconds(elapsed),
        }
    workload_classes = {}
    for cls, indexes in sorted(by_class.items()):
        admitted = [i for i in indexes if rec.last_admit[i] >= 0]
        to_admit = sum((rec.last_admit[i] - rec.jobs[i].submit) // 1000 for i in admitted)
        to_finish = sum((rec.finish[i] - rec.jobs[i].submit) // 1000 for i in indexes if rec.finish[i] >= 0)
        workload_classes[cls] = {
            "count": len(indexes),
            "averageTimeToAdmissionMs": to_admit // len(indexes) if indexes else 0,
            "averageTimeToFinishMs": to_finish // len(indexes) if indexes else 0,
            "totalEvictions": sum(rec.evictions[i] for i in indexes),
        }
    return {
        "cmd": {"wallMs": end // 1000},
        "clusterQueueClasses": usage,
        "workloadClasses": workload_classes,
    }
