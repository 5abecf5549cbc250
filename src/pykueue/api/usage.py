"""Cost and usage per tenant: the runs a ledger records, and what they add up to.

A **run** is one admission of a workload: from the moment its quota was reserved to the
moment it finished, was evicted (preempted, timed out, deactivated) or was deleted,
holding a fixed amount of each resource of each flavor. Everything here is pure: it reads
Workload manifests and numbers and returns numbers, so the standalone server (which
records runs in its SQLite file), the Kubernetes-mode report (which derives them from the
Workloads still in the cluster) and the tests share it.

    current_run(workload)            the run a Workload manifest shows (None: it holds nothing)
    transition(before, after, now)   the ledger rows one write of a Workload opens or closes
    usage(runs, ...)                 resource-hours, cost, lost work and runs per group
    efficiency(runs, queues, ...)    nominal vs used vs borrowed vs lent per ClusterQueue

Units, as docs/governance.md says: CPU in cores, memory-like resources (``memory``,
``ephemeral-storage``, ``hugepages-*``) in GiB, everything else in whole units; usage is in
unit-hours; a flavor's price (annotation ``pykueue.io/price``) is per unit-hour. Times are
seconds since the epoch (floats). Only the standard library and `quantity` are imported:
`pykueue report usage` must start fast (tests/test_cli_startup.py).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from pykueue.api import quantity

PRICE = "pykueue.io/price"
GROUPINGS = ("namespace", "tenant", "localqueue", "clusterqueue")
PREEMPTED = "Preempted"
FINISHED = "Finished"
DELETED = "Deleted"
GIB = 2**30
_BYTES = ("memory", "ephemeral-storage")
_PRICE_ITEM = re.compile(r"^\s*([^=\s]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*$")


# ------------------------------------------------------------------ prices


def is_bytes(resource: str) -> bool:
    """Is this resource counted in bytes (and so reported, and priced, per GiB)?"""
    return resource in _BYTES or resource.startswith("hugepages-")


def parse_prices(text: str) -> dict[str, float]:
    """``nvidia.com/gpu=2.50,cpu=0.04,memory=0.005`` as {resource: price per unit-hour}.

    Raises ValueError naming the first bad item; a resource named twice is refused too.
    """
    prices: dict[str, float] = {}
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError("must list RESOURCE=PRICE pairs, e.g. 'nvidia.com/gpu=2.50,cpu=0.04' (got nothing)")
    for item in items:
        match = _PRICE_ITEM.match(item)
        if match is None:
            raise ValueError(
                f"{item.strip()!r} is not RESOURCE=PRICE with a price of 0 or more, e.g. 'nvidia.com/gpu=2.50'"
            )
        resource, price = match.group(1), float(match.group(2))
        if resource in prices:
            raise ValueError(f"{resource} is priced twice")
        prices[resource] = price
    return prices


# ------------------------------------------------------------------ runs


@dataclass(frozen=True, slots=True)
class Run:
    """One admission of a workload, and the quota it held throughout."""

    uid: str
    namespace: str
    name: str  # the Workload's
    local_queue: str
    cluster_queue: str
    owner: str  # "Job/name" of the object that owns the Workload, "" when none
    start: float
    end: float | None  # None: still running
    ended_by: str  # "" while running; Finished, Preempted, another eviction reason, Deleted
    held: tuple[tuple[str, str, float], ...]  # (flavor, resource, amount in report units)

    @property
    def lost(self) -> bool:
        """Was the work of this run possibly lost (it ended by a preemption)?"""
        return self.ended_by == PREEMPTED

    def to_json(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "namespace": self.namespace,
            "name": self.name,
            "localQueue": self.local_queue,
            "clusterQueue": self.cluster_queue,
            "owner": self.owner,
            "start": self.start,
            "end": self.end,
            "endedBy": self.ended_by,
            "held": [list(h) for h in self.held],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Run:
        end = data.get("end")
        return Run(
            uid=str(data["uid"]),
            namespace=str(data["namespace"]),
            name=str(data["name"]),
            local_queue=str(data.get("localQueue", "")),
            cluster_queue=str(data.get("clusterQueue", "")),
            owner=str(data.get("owner", "")),
            start=float(data["start"]),
            end=None if end is None else float(end),
            ended_by=str(data.get("endedBy", "")),
            held=tuple((str(f), str(r), float(a)) for f, r, a in data.get("held", [])),
        )


def parse_time(text: str) -> float | None:
    """An RFC 3339 time (as conditions carry) in seconds since the epoch; None if unreadable."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError, AttributeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond  # type: ignore[no-any-return]
    return None


def _true_since(workload: Mapping[str, Any], kind: str) -> float | None:
    cond = _condition(workload, kind)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(str(cond.get("lastTransitionTime", "")))


@lru_cache(maxsize=4096)  # a handful of distinct quantities; parsing one is ~100 µs of Fractions
def _amount(resource: str, value: str | int | float) -> float:
    milli = quantity.parse(value)
    units = milli / 1000
    return units / GIB if is_bytes(resource) else units


def held_quota(admission: Mapping[str, Any]) -> tuple[tuple[str, str, float], ...]:
    """What an admission holds, summed over its pod sets, per (flavor, resource)."""
    total: dict[tuple[str, str], float] = defaultdict(float)
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for resource, value in (assignment.get("resourceUsage") or {}).items():
            total[(str(flavors.get(resource, "")), resource)] += _amount(resource, value)
    return tuple((f, r, a) for (f, r), a in sorted(total.items()))


def _owner(workload: Mapping[str, Any]) -> str:
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
        return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return ""


def current_run(workload: Mapping[str, Any]) -> Run | None:
    """The run a Workload shows: its quota reservation, ended if it finished. None: no quota held."""
    status = workload.get("status") or {}
    admission = status.get("admission")
    start = _true_since(workload, "QuotaReserved")
    if not admission or start is None:
        return None
    meta = workload.get("metadata") or {}
    finished = _true_since(workload, "Finished")
    end = None if finished is None else max(start, finished)
    return Run(
        uid=str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        local_queue=str((workload.get("spec") or {}).get("queueName", "")),
        cluster_queue=str(admission.get("clusterQueue", "")),
        owner=_owner(workload),
        start=start,
        end=end,
        ended_by="" if end is None else FINISHED,
        held=held_quota(admission),
    )


def _closed(run: Run, after: Mapping[str, Any] | None, now: float) -> Run:
    """``run``, which ``after`` no longer shows, ended: when and why ``after`` says."""
    if after is None:
        return _replace_end(run, now, DELETED)
    evicted = _condition(after, "Evicted")
    if evicted is not None and evicted.get("status") == "True":
        at = parse_time(str(evicted.get("lastTransitionTime", ""))) or now
        return _replace_end(run, at, str(evicted.get("reason") or "Evicted"))
    if (finished := _true_since(after, "Finished")) is not None:
        return _replace_end(run, finished, FINISHED)
    reserved = _condition(after, "QuotaReserved")
    at = parse_time(str((reserved or {}).get("lastTransitionTime", ""))) or now
    return _replace_end(run, at, str((reserved or {}).get("reason") or "Released"))


def _replace_end(run: Run, end: float, why: str) -> Run:
    return Run(
        run.uid,
        run.namespace,
        run.name,
        run.local_queue,
        run.cluster_queue,
        run.owner,
        run.start,
        max(run.start, end),
        why,
        run.held,
    )


def _holds(workload: Mapping[str, Any] | None) -> bool:
    return workload is not None and bool((workload.get("status") or {}).get("admission"))


def _run_fields(workload: Mapping[str, Any]) -> tuple[Any, ...]:
    """What `current_run` reads of a Workload, cheaply compared."""
    status = workload.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if c.get("type") in ("QuotaReserved", "Finished")]
    return status.get("admission"), conditions, (workload.get("spec") or {}).get("queueName")


def transition(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, now: float) -> list[Run]:
    """The ledger rows (keyed by uid and start) one write of a Workload changes.

    ``after`` None is a deletion. A run ``before`` showed open and ``after`` no longer shows
    is closed (evicted, finished, released, deleted); the run ``after`` shows is written as
    it now stands. Nothing else changes: rows of runs that ended earlier stay as recorded.
    """
    if not _holds(before) and not _holds(after):
        return []  # most writes: a pending workload's explanation changed
    if before is not None and after is not None and _run_fields(before) == _run_fields(after):
        return []  # an admitted workload's other status fields changed: its run did not
    rows: list[Run] = []
    old = current_run(before) if before is not None else None
    new = current_run(after) if after is not None else None
    if old is not None and old.end is None and (new is None or new.start != old.start):
        rows.append(_closed(old, after, now))
    if new is not None and new != old:
        rows.append(new)
    return rows


# ------------------------------------------------------------------ integration


def clipped(run: Run, since: float, until: float) -> float:
    """Seconds of ``run`` inside [since, until] (a run still open counts up to ``until``)."""
    end = until if run.end is None else min(run.end, until)
    return max(0.0, end - max(run.start, since))


def overlaps(run: Run, since: float, until: float) -> bool:
    """Did ``run`` hold its quota at some time inside the window (an instant's run too)?"""
    if run.end is not None and run.end == run.start:
        return since <= run.start <= until
    return run.start < until and (run.end is None or run.end > since)


def group_of(run: Run, by: str) -> str:
    if by in ("namespace", "tenant"):
        return run.namespace
    if by == "localqueue":
        return f"{run.namespace}/{run.local_queue}"
    if by == "clusterqueue":
        return run.cluster_queue
    raise ValueError(f"cannot group by {by!r}: choose one of {', '.join(GROUPINGS)}")


@dataclass
class UsageRow:
    """One group's usage over the window."""

    group: str
    runs: int = 0
    held_seconds: float = 0.0  # wall time of its runs inside the window
    hours: dict[str, float] = field(default_factory=dict)  # resource -> unit-hours
    cost: float = 0.0
    lost_hours: dict[str, float] = field(default_factory=dict)
    lost_cost: float = 0.0
    preempted: int = 0
    unpriced: set[str] = field(default_factory=set)  # "flavor/resource" held without a price

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "runs": self.runs,
            "heldSeconds": round(self.held_seconds, 3),
            "resourceHours": {r: round(h, 9) for r, h in sorted(self.hours.items())},
            "cost": round(self.cost, 9),
            "lostResourceHours": {r: round(h, 9) for r, h in sorted(self.lost_hours.items())},
            "lostCost": round(self.lost_cost, 9),
            "preemptedRuns": self.preempted,
            "unpriced": sorted(self.unpriced),
        }


def usage(
    runs: Iterable[Run],
    prices: Mapping[str, Mapping[str, float]],
    since: float,
    until: float,
    by: str = "namespace",
) -> list[UsageRow]:
    """Per group: runs overlapping the window, their resource-hours and cost inside it, and
    the same for the runs that ended by a preemption (lost work), sorted by group."""
    rows: dict[str, UsageRow] = {}
    for run in runs:
        if not overlaps(run, since, until):
            continue
        seconds = clipped(run, since, until)
        group = group_of(run, by)
        row = rows.setdefault(group, UsageRow(group))
        row.runs += 1
        row.held_seconds += seconds
        row.preempted += run.lost
        for flavor, resource, amount in run.held:
            hours = amount * seconds / 3600
            price = (prices.get(flavor) or {}).get(resource)
            if price is None:
                row.unpriced.add(f"{flavor}/{resource}")
            cost = hours * (price or 0.0)
            row.hours[resource] = row.hours.get(resource, 0.0) + hours
            row.cost += cost
            if run.lost:
                row.lost_hours[resource] = row.lost_hours.get(resource, 0.0) + hours
                row.lost_cost += cost
    return [rows[k] for k in sorted(rows)]


# ------------------------------------------------------------------ efficiency


@dataclass(frozen=True, slots=True)
class Queue:
    """What efficiency needs of a ClusterQueue: its cohort and nominal quota."""

    name: str
    cohort: str
    nominal: Mapping[tuple[str, str], float]  # (flavor, resource) -> amount in report units

    @staticmethod
    def of_manifest(cq: Mapping[str, Any]) -> Queue:
        spec = cq.get("spec") or {}
        nominal: dict[tuple[str, str], float] = {}
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    key = (str(flavor.get("name", "")), str(res.get("name", "")))
                    nominal[key] = _amount(key[1], res.get("nominalQuota", 0))
        cohort = spec.get("cohortName") or spec.get("cohort") or ""
        return Queue(str((cq.get("metadata") or {}).get("name", "")), str(cohort), nominal)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cohort": self.cohort,
            "nominal": [[f, r, a] for (f, r), a in self.nominal.items()],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Queue:
        nominal = {(str(f), str(r)): float(a) for f, r, a in data.get("nominal", [])}
        return Queue(str(data["name"]), str(data.get("cohort", "")), nominal)


@dataclass
class EfficiencyRow:
    """A ClusterQueue's (flavor, resource) over the window: averages in report units."""

    cluster_queue: str
    flavor: str
    resource: str
    nominal: float
    used: float
    borrowed: float
    lent: float

    @property
    def utilisation(self) -> float | None:
        """Used as a share of nominal (None when nominal is 0)."""
        return self.used / self.nominal if self.nominal else None

    def to_json(self) -> dict[str, Any]:
        return {
            "clusterQueue": self.cluster_queue,
            "flavor": self.flavor,
            "resource": self.resource,
            "nominal": round(self.nominal, 9),
            "used": round(self.used, 9),
            "borrowed": round(self.borrowed, 9),
            "lent": round(self.lent, 9),
        }


def _steps(runs: Iterable[Run], since: float, until: float) -> list[tuple[float, str, str, str, float]]:
    """(time, cluster queue, flavor, resource, change in usage) of every run inside the window."""
    steps = []
    for run in runs:
        start, end = max(run.start, since), until if run.end is None else min(run.end, until)
        if end <= start:
            continue
        for flavor, resource, amount in run.held:
            steps.append((start, run.cluster_queue, flavor, resource, amount))
            steps.append((end, run.cluster_queue, flavor, resource, -amount))
    steps.sort(key=lambda s: s[0])
    return steps


def efficiency(
    runs: Iterable[Run], queues: Iterable[Queue], since: float, until: float
) -> list[EfficiencyRow]:
    """Time averages over [since, until] per ClusterQueue and (flavor, resource).

    used: what its admitted workloads held. borrowed: the part of it above its nominal quota.
    lent: the part of its unused nominal quota that the other queues of its cohort were
    borrowing at the same time; when several queues had unused quota, what the cohort
    borrowed is shared out among them in proportion to their unused quota.
    """
    known = {q.name: q for q in queues}
    span = until - since
    used: dict[tuple[str, str, str], float] = defaultdict(float)  # (cq, flavor, resource) -> now
    totals: dict[str, dict[tuple[str, str, str], float]] = {
        k: defaultdict(float) for k in ("used", "borrowed", "lent")
    }
    keys: set[tuple[str, str, str]] = {(q.name, f, r) for q in known.values() for (f, r) in q.nominal}
    previous = since
    for at, cq, flavor, resource, change in [*_steps(runs, since, until), (until, "", "", "", 0.0)]:
        if at > previous:
            _accumulate(used, known, totals, at - previous)
            previous = at
        if cq:
            used[(cq, flavor, resource)] += change
            keys.add((cq, flavor, resource))
    rows = []
    for cq, flavor, resource in sorted(keys):
        queue = known.get(cq)
        nominal = queue.nominal.get((flavor, resource), 0.0) if queue else 0.0
        rows.append(
            EfficiencyRow(
                cq,
                flavor,
                resource,
                nominal,
                *(
                    totals[k][(cq, flavor, resource)] / span if span > 0 else 0.0
                    for k in ("used", "borrowed", "lent")
                ),
            )
        )
    return rows


def _accumulate(
    used: Mapping[tuple[str, str, str], float],
    queues: Mapping[str, Queue],
    totals: dict[str, dict[tuple[str, str, str], float]],
    seconds: float,
) -> None:
    """Add ``seconds`` of the current usage to the totals (used, borrowed, lent)."""
    borrowed_in: dict[tuple[str, str, str], float] = defaultdict(float)  # (cohort, flavor, res)
    unused_in: dict[tuple[str, str, str], float] = defaultdict(float)
    for (cq, flavor, resource), amount in used.items():
        if amount <= 1e-12:
            continue
        totals["used"][(cq, flavor, resource)] += amount * seconds
        queue = queues.get(cq)
        nominal = queue.nominal.get((flavor, resource), 0.0) if queue else 0.0
        over = max(0.0, amount - nominal)
        totals["borrowed"][(cq, flavor, resource)] += over * seconds
        if queue and queue.cohort and over > 0:
            borrowed_in[(queue.cohort, flavor, resource)] += over
    if not borrowed_in:
        return
    for queue in queues.values():
        for (flavor, resource), nominal in queue.nominal.items():
            unused = max(0.0, nominal - used.get((queue.name, flavor, resource), 0.0))
            if queue.cohort and unused > 0:
                unused_in[(queue.cohort, flavor, resource)] += unused
    for queue in queues.values():
        for (flavor, resource), nominal in queue.nominal.items():
            pool = (queue.cohort, flavor, resource)
            unused = max(0.0, nominal - used.get((queue.name, flavor, resource), 0.0))
            if not queue.cohort or unused <= 0 or borrowed_in.get(pool, 0.0) <= 0:
                continue
            lent = borrowed_in[pool] * unused / unused_in[pool]
            totals["lent"][(queue.name, flavor, resource)] += min(unused, lent) * seconds


# ------------------------------------------------------------------ reconciliation


@dataclass(frozen=True, slots=True)
class Check:
    """One job's quota-holding time (the ledger's) set against its processes' run time."""

    namespace: str
    owner: str
    held_seconds: float
    ran_seconds: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return abs(self.held_seconds - self.ran_seconds) <= self.tolerance

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "owner": self.owner,
            "heldSeconds": round(self.held_seconds, 3),
            "ranSeconds": round(self.ran_seconds, 3),
            "ok": self.ok,
        }


def reconcile(
    runs: Iterable[Run], ran: Mapping[str, float], since: float, slack: float = 3.0, share: float = 0.05
) -> list[Check]:
    """Checks for the jobs whose every run is in the ledger, ended, and started in the window.

    ``ran`` maps "namespace/Kind/name" to the seconds the executor saw the job's processes
    run. A job is within tolerance when the two differ by at most ``slack`` seconds per run
    (conditions carry whole seconds, and a process starts a moment after its admission)
    plus ``share`` of the time held.
    """
    by_job: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if run.owner:
            by_job[(run.namespace, run.owner)].append(run)
    checks = []
    for (namespace, owner), job_runs in sorted(by_job.items()):
        seconds = ran.get(f"{namespace}/{owner}")
        if seconds is None or any(r.end is None or r.start < since for r in job_runs):
            continue
        held = sum((r.end or r.start) - r.start for r in job_runs)
        checks.append(Check(namespace, owner, held, seconds, slack * len(job_runs) + share * held))
    return checks


# ------------------------------------------------------------------ the document a report reads


def document(
    runs: Iterable[Run],
    flavors: Iterable[Mapping[str, Any]],
    cluster_queues: Iterable[Mapping[str, Any]],
    ran: Mapping[str, float],
    since: float,
    until: float,
    source: str,
) -> dict[str, Any]:
    """What `pykueue report` computes from, as the standalone API serves it (JSON)."""
    prices: dict[str, dict[str, float]] = {}
    for flavor in flavors:
        meta = flavor.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(PRICE)
        if raw is None:
            continue
        try:
            prices[str(meta.get("name", ""))] = parse_prices(str(raw))
        except ValueError:
            continue  # refused when applied; one written around validation prices nothing
    return {
        "source": source,
        "since": since,
        "until": until,
        "runs": [r.to_json() for r in runs],
        "prices": prices,
        "queues": [Queue.of_manifest(cq).to_json() for cq in cluster_queues],
        "ran": dict(ran),
    }


def job_durations(jobs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Kubernetes batch Jobs that completed: "namespace/Job/name" -> completionTime - startTime.

    The job controller clears ``startTime`` when a Job is suspended (a preemption), so this is
    the last run's time, the one run a Workload still shows.
    """
    out = {}
    for job in jobs:
        meta, status = job.get("metadata") or {}, job.get("status") or {}
        start = parse_time(str(status.get("startTime", "")))
        end = parse_time(str(status.get("completionTime", "")))
        if start is not None and end is not None:
            out[f"{meta.get('namespace', '')}/Job/{meta.get('name', '')}"] = max(0.0, end - start)
    return out


def ran_seconds(jobs: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """What standalone's executor recorded on each Job: "namespace/Job/name" -> seconds run."""
    out = {}
    for job in jobs:
        meta = job.get("metadata") or {}
        used = (((job.get("status") or {}).get("pykueue") or {}).get("usage") or {}).get("runSeconds")
        if used is not None:
            out[f"{meta.get('namespace', '')}/Job/{meta.get('name', '')}"] = float(used)
    return out
