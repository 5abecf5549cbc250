"""Per-cluster figures of a MultiKueue run: usage of each cluster's quota, jobs, waits.

`pykueue.sim.multicluster` keeps one `ClusterRecord` per cluster (the manager and
each worker). After every instant it samples the cluster's engine: the quota in
use per (flavor, resource), summed over its ClusterQueues, is integrated over
time exactly (it only changes at events), so

    usage % of a flavor's resource = time integral of what is in use
                                     / (capacity x makespan)

where the capacity is the nominal quota of the cluster's ClusterQueues and
Cohort objects in that flavor. On the manager "in use" is what it *reserves*:
its quota holds a job from its reservation, while the workers race for it,
until the job finishes. On a worker it is what the jobs sent there hold,
losing copies included while they hold quota (until they are withdrawn).

The waits split a job's wait (submission to its first start) in two:

    manager wait   submission to the manager's quota reservation
    worker wait    that reservation to the first reservation on a worker
                   (the dispatch latency plus the time the copies queued)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pykueue.engine.state import State
from pykueue.sim.jobs import SECOND
from pykueue.sim.metrics import HOUR, Recorder, distribution

MANAGER = "manager"
WORKER = "worker"


def capacity_of(state: State) -> dict[tuple[str, str], int]:
    """Nominal quota per (flavor, resource) of the cluster's ClusterQueues and Cohort objects."""
    total: dict[tuple[str, str], int] = {}
    holders = [cq.quotas for cq in state.cluster_queues.values()]
    holders += [cohort.quotas for cohort in state.cohorts.values()]
    for quotas in holders:
        for fr, quota in quotas.items():
            total[fr] = total.get(fr, 0) + quota.nominal
    return total


@dataclass(slots=True)
class ClusterRecord:
    """What one cluster's quota did over a run, and what it did for whom."""

    name: str
    role: str  # "manager" or "worker"
    capacity: dict[tuple[str, str], int]
    in_use: dict[tuple[str, str], int] = field(default_factory=dict)
    integral: dict[tuple[str, str], int] = field(default_factory=dict)  # milli-units x microseconds
    last: int = 0
    times: list[int] = field(default_factory=lambda: [0])
    primary_in_use: list[int] = field(default_factory=lambda: [0])  # for the report's chart
    admitted: int = 0  # jobs started here (a job started again after an eviction counts again)
    finished: int = 0
    copies: int = 0  # copies received (workers)
    withdrawn: int = 0  # copies removed: another worker won, or the manager evicted the job
    preemptions: int = 0  # workloads this cluster's scheduler preempted (copies included)
    lost: int = 0  # jobs that won here and were dispatched again after workerLostTimeout
    waits: list[int] = field(default_factory=list)  # copy arrival -> its reservation, jobs won here

    def sample(self, state: State, now: int, primary: str) -> None:
        """Integrate what was in use since the last sample and take the new amounts."""
        elapsed = now - self.last
        if elapsed > 0:
            for fr, value in self.in_use.items():
                self.integral[fr] = self.integral.get(fr, 0) + value * elapsed
        current: dict[tuple[str, str], int] = {}
        for usage in state.cq_usage.values():
            for fr, value in usage.items():
                if value:
                    current[fr] = current.get(fr, 0) + value
        self.in_use = current
        self.last = now
        used = sum(value for (_, resource), value in current.items() if resource == primary)
        if self.times[-1] == now:
            self.primary_in_use[-1] = used
        else:
            self.times.append(now)
            self.primary_in_use.append(used)

    def summary(self, end: int, primary: str) -> dict[str, Any]:
        usage: dict[str, Any] = {}
        for flavor, resource in sorted({*self.capacity, *self.integral}):
            fr = (flavor, resource)
            capacity = self.capacity.get(fr, 0)
            used = self.integral.get(fr, 0)
            usage[f"{flavor}/{resource}"] = {
                "capacity": round(capacity / 1000, 4),
                "averageInUse": round(used / end / 1000, 4) if end else 0.0,
                "usedResourceHours": round(used / 1000 / HOUR, 4),
                "percentOfCapacity": round(100 * used / (capacity * end), 2) if capacity and end else None,
            }
        primary_used = sum(v for (_, r), v in self.integral.items() if r == primary)
        primary_capacity = sum(v for (_, r), v in self.capacity.items() if r == primary)
        result: dict[str, Any] = {
            "role": self.role,
            "admitted": self.admitted,
            "finished": self.finished,
            "preemptions": self.preemptions,
            "usage": usage,
            "usedPrimaryHours": round(primary_used / 1000 / HOUR, 4),
            "primaryPercentOfCapacity": round(100 * primary_used / (primary_capacity * end), 2)
            if primary_capacity and end
            else None,
        }
        if self.role != MANAGER:
            result["copies"] = self.copies
            result["copiesWithdrawn"] = self.withdrawn
            result["lostToTimeout"] = self.lost
            result["workerWait"] = distribution(sorted(self.waits))
        return result


@dataclass(slots=True)
class Figures:
    """A MultiKueue run's figures beside the manager's `Recorder`."""

    dispatcher: str
    latency: int  # microseconds from the manager's reservation to a copy's arrival
    manager: ClusterRecord
    workers: dict[str, ClusterRecord]  # in MultiKueueCluster order
    site: list[str]  # per job: where it last started ("" never)
    manager_wait: list[int]  # per job: submission -> the reservation that led to its first start (-1)
    worker_wait: list[int]  # per job: that reservation -> its first start on a worker (-1: none)
    worker_lost_timeout: int = 0
    outages: list[tuple[str, int, int]] = field(default_factory=list)  # (worker, start, end), merged

    def summary(self, rec: Recorder) -> dict[str, Any]:
        """The summary's ``multiKueue`` section: the model, the split waits and every cluster."""
        end = rec.end
        primary = rec.primary
        used = sum(v for w in self.workers.values() for (_, r), v in w.integral.items() if r == primary)
        capacity = sum(v for w in self.workers.values() for (_, r), v in w.capacity.items() if r == primary)
        return {
            "workersPrimaryPercentOfCapacity": round(100 * used / (capacity * end), 2)
            if capacity and end
            else None,
            "dispatcher": self.dispatcher,
            "dispatchLatencySeconds": round(self.latency / SECOND, 6),
            "workerLostTimeoutSeconds": round(self.worker_lost_timeout / SECOND, 6),
            "outages": [
                {
                    "worker": name,
                    "startSeconds": round(start / SECOND, 6),
                    "endSeconds": round(end / SECOND, 6),
                }
                for name, start, end in self.outages
            ],
            "managerWait": distribution(sorted(w for w in self.manager_wait if w >= 0)),
            "workerWait": distribution(sorted(w for w in self.worker_wait if w >= 0)),
            "manager": self.manager.summary(end, rec.primary),
            "workers": {name: record.summary(end, rec.primary) for name, record in self.workers.items()},
        }

    def records(self) -> list[ClusterRecord]:
        return [self.manager, *self.workers.values()]
