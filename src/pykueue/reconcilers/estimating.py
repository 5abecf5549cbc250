"""Estimated start times of pending workloads, refreshed in the background.

    every `interval` seconds (or longer, see below):
      learn   finished Workloads in the admission cache -> running times per LocalQueue
              pending Workloads' maximumExecutionTimeSeconds / their Job's activeDeadlineSeconds -> limits
      snap    copy the live engine state (the only step that holds the event loop)
      play    `engine.forecast.estimate` on the copy, in a worker thread
      keep    the answers, served by `StartEstimates.estimated_start` until the next refresh

The forward runs cost time proportional to the pending work (docs/estimates.md
has figures). Two bounds keep that from the admission loop: the wait between two
refreshes is at least ``load_factor`` times what the last refresh took, and the
forward runs of one refresh get a budget of scheduling cycles worth about
``budget_seconds`` of CPU (from the cost per cycle of the last refresh). A queue
longer than the budget reaches gets estimates for its soonest starts only.

Wall-clock time enters here (the engine is given ``now`` in the state); the
model and the forward run are pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pykueue.engine import forecast, intake, runtimes
from pykueue.reconcilers import workload_status
from pykueue.reconcilers.admission import AdmissionController
from pykueue.store.base import Key, Manifest

log = logging.getLogger(__name__)

# Looks up a Job by uid (the owner of a Workload), for its activeDeadlineSeconds.
JobByUid = Callable[[str], Manifest | None]


def rfc3339(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def as_dict(estimate: forecast.Estimate) -> dict[str, str | None]:
    """The shape the dashboard, the API and the CLI show: RFC 3339 times and the basis; the
    times are None when the start is unknown (the basis says why)."""
    if not estimate.known:
        return {"at": None, "low": None, "high": None, "basis": estimate.basis}
    return {
        "at": rfc3339(estimate.at),
        "low": rfc3339(estimate.low),
        "high": rfc3339(estimate.high),
        "basis": estimate.basis,
    }


def ran_for(obj: Manifest) -> tuple[str, int] | None:
    """A finished Workload's LocalQueue key and running time (reservation to Finished), if known."""
    meta = obj.get("metadata") or {}
    queue = (obj.get("spec") or {}).get("queueName")
    if not queue:
        return None
    times: dict[str, int] = {}
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("lastTransitionTime"):
            with contextlib.suppress(ValueError):
                times[str(cond.get("type"))] = intake.micros(
                    datetime.fromisoformat(str(cond["lastTransitionTime"]).replace("Z", "+00:00"))
                )
    start = times.get("QuotaReserved", times.get("Admitted"))
    end = times.get("Finished")
    if start is None or end is None or end < start:
        return None
    # Condition times are whole seconds: a run within one second counts as half of one.
    return f"{meta.get('namespace') or 'default'}/{queue}", max(end - start, runtimes.SECOND // 2)


def limit_of(obj: Manifest, job_by_uid: JobByUid | None) -> tuple[int, str] | None:
    """A pending Workload's declared running limit in seconds, and where it is declared."""
    seconds = (obj.get("spec") or {}).get("maximumExecutionTimeSeconds")
    if isinstance(seconds, int) and seconds > 0:
        return seconds, runtimes.MAX_EXECUTION_TIME
    if job_by_uid is None:
        return None
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") != "Job" or not ref.get("uid"):
            continue
        job = job_by_uid(str(ref["uid"]))
        deadline = ((job or {}).get("spec") or {}).get("activeDeadlineSeconds")
        if isinstance(deadline, int) and deadline > 0:
            return deadline, runtimes.ACTIVE_DEADLINE
    return None


# The least cycle budget of an expected run: the soonest few starts of every queue.
MIN_CYCLES = 20


@dataclass
class StartEstimates:
    """The latest estimates for the pending workloads of one admission controller."""

    admission: AdmissionController
    settings: runtimes.Settings = field(default_factory=runtimes.Settings)
    interval_seconds: float = 10.0
    # At most about a tenth of the wall time (of one core) goes to refreshes: the forward runs
    # share the interpreter lock with the admission loop, and at a quarter (3.0) they were
    # 11-15 % of the controller's CPU under upstream's scheduling-performance runner.
    load_factor: float = 9.0
    # CPU seconds the forward runs of one refresh may take, about (0: no budget). Without
    # one, a queue that grew since the last refresh made the next one several times
    # longer, and the wait above came too late: under upstream's scheduling-performance
    # runner (15,000 workloads) the forward runs took a third of the controller's CPU.
    budget_seconds: float = 1.5
    # The budget's first guess, before a refresh has measured the cost of a cycle.
    first_max_cycles: int = 200
    cycles_per_second: float = 0.0  # measured by the last refresh that ran any cycle
    job_by_uid: JobByUid | None = None
    # Called after each refresh with the new estimates (Kubernetes mode writes annotations).
    on_refresh: Callable[[dict[str, forecast.Estimate]], Any] | None = None
    model: runtimes.Model = field(init=False)
    estimates: dict[str, forecast.Estimate] = field(default_factory=dict)
    refreshed_at: datetime | None = None
    last_seconds: float = 0.0  # the last refresh, all steps
    last_snapshot_seconds: float = 0.0  # of which on the event loop
    _learned: set[str] = field(default_factory=set)  # finished Workloads already learned from (uid or key)

    def __post_init__(self) -> None:
        self.model = runtimes.Model(self.settings)

    def estimated_start(self, workload_key: str) -> dict[str, str | None] | None:
        """The latest estimate of the workload ``namespace/name``, or None (admitted, unknown, not yet)."""
        found = self.estimates.get(workload_key)
        if found is None:
            return None
        wl = self.admission.state.workloads.get(workload_key)
        if wl is None or wl.admission is not None:
            return None  # started (or gone) since the last refresh
        return as_dict(found)

    def learn(self) -> None:
        """Take running times from finished Workloads and limits from pending ones."""
        limits: dict[str, tuple[int, str]] = {}
        seen: set[str] = set()
        for key, obj in self.admission.cache.items():
            if key.kind != "Workload":
                continue
            if workload_status.is_finished(obj):
                seen.add(self._learn_finished(key, obj))
            else:  # pending or running: a running one's limit says how much it has left
                limit = limit_of(obj, self.job_by_uid)
                if limit is not None:
                    limits[f"{key.namespace or 'default'}/{key.name}"] = (
                        limit[0] * runtimes.SECOND,
                        limit[1],
                    )
        self.model.limits = limits
        self._learned &= seen  # forget deleted Workloads: the set stays as large as the store

    def _learn_finished(self, key: Key, obj: Manifest) -> str:
        ident = str((obj.get("metadata") or {}).get("uid") or f"{key.namespace}/{key.name}")
        if ident in self._learned:
            return ident
        self._learned.add(ident)
        found = ran_for(obj)
        if found is not None:
            # What share of its declared limit it used teaches what limits mean in its queue.
            limit = limit_of(obj, self.job_by_uid)
            self.model.learn(*found, limit[0] * runtimes.SECOND if limit is not None else None)
        return ident

    async def refresh(self) -> None:
        started = time.perf_counter()
        self.learn()
        snap = forecast.snapshot(self.admission.state)
        # The state's clock moves at each admission pass; the estimate starts from now.
        snap = dataclasses.replace(snap, now=max(snap.now, intake.micros(self.admission.clock())))
        model = self.model.copy()
        self.last_snapshot_seconds = time.perf_counter() - started
        self.estimates = await asyncio.to_thread(self._play, snap, model, self.max_cycles())
        self.refreshed_at = intake.from_micros(snap.now)
        self.last_seconds = time.perf_counter() - started
        if self.on_refresh is not None:
            result = self.on_refresh(self.estimates)
            if asyncio.iscoroutine(result):
                await result

    def max_cycles(self) -> int | None:
        """The cycle budget of the next refresh's forward runs (None: no budget)."""
        if self.budget_seconds <= 0:
            return None
        if self.cycles_per_second <= 0:
            return self.first_max_cycles
        # The expected run gets a fifth: each range run takes up to twice its cycles.
        return max(MIN_CYCLES, int(self.budget_seconds * self.cycles_per_second / 5))

    def _play(
        self, snap: forecast.Snapshot, model: runtimes.Model, bound: int | None
    ) -> dict[str, forecast.Estimate]:
        started = time.thread_time()
        found = forecast.estimate(snap, model, max_cycles=bound)
        cycles = found.cycles
        spent = time.thread_time() - started
        if cycles and spent > 0:
            self.cycles_per_second = cycles / spent
        return found

    def next_wait(self) -> float:
        return max(self.interval_seconds, self.load_factor * self.last_seconds)

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh until ``stop`` is set; a failed refresh is logged and retried next time."""
        while not stop.is_set():
            try:
                await self.refresh()
            except Exception:
                log.exception("estimating start times failed; retrying in %.0f s", self.next_wait())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.next_wait())
