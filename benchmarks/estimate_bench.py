"""Estimated start times for 10,000 pending workloads: what a refresh costs, and what admission feels.

The state: upstream's baseline shape (30 ClusterQueues in 5 cohorts) with its first
10,000 workloads submitted at once and the first cycles run, so some hold quota
and the rest wait; running times learned from 300 of its jobs.

A refresh is what `pykueue.reconcilers.estimating.StartEstimates.refresh` does:
a snapshot on the event loop, then the three forward runs (estimate, low, high)
in a worker thread. Measured:

* the snapshot (the only part that holds the event loop): target <= 0.5 s of the
  loop thread's CPU (wall time is printed too; on two shared cores it stretches);
* the forward runs (off the loop): reported; the refresh interval grows to
  ``load_factor`` times this, so it bounds the estimator's share of a core, not
  admission;
* a refresh under the controller's cycle budget (`StartEstimates.budget_seconds`,
  sized from the cycles per CPU second the whole refresh measured): its CPU time and how
  many pending workloads it estimates (the soonest starts);
* admission while a refresh runs: a task on the loop runs a scheduling cycle on
  the live state every 20 ms (as the admission controller's passes do) and we
  compare the cycles' duration and the loop's worst lateness with and without a
  refresh in the background. Target: the worst lateness during a refresh is at
  most the idle run's worst lateness plus the snapshot's wall time plus 100 ms (the
  thread competes for the interpreter lock, but Python hands it over every 5 ms).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from pykueue.engine import forecast, runtimes, scheduler
from pykueue.engine.state import State
from pykueue.reconcilers.estimating import MIN_CYCLES, StartEstimates
from pykueue.sim import generator
from pykueue.sim.design import Design

BASELINE = Path(__file__).resolve().parents[2] / "shared" / "bench" / "kueue-scheduler-perf" / "baseline"
PENDING = 10_000
SNAPSHOT_TARGET = 0.5
LATENESS_SLACK = 0.1


@dataclass
class Result:
    pending: int
    admitted: int
    snapshot_seconds: float
    snapshot_cpu: float  # the loop thread's CPU time: what a busy neighbour does not stretch
    forward_seconds: float
    estimated: int
    cycles: int  # of the three forward runs of the whole refresh
    budget_cycles: int  # the expected run's bound under the controller's budget
    budget_cpu: float  # CPU seconds of the budgeted refresh's forward runs
    budget_estimated: int
    idle_cycle_ms: float
    busy_cycle_ms: float
    idle_lateness_ms: float
    busy_lateness_ms: float


def build() -> tuple[State, runtimes.Model]:
    generated = generator.load(BASELINE / "generator.yaml")
    design = Design("baseline", generated.objects, generated.cq_classes)
    jobs = design.check(generated.jobs)[:PENDING]
    state = design.state()
    rng = random.Random(0)
    for job in jobs:
        state.add_workload(job.workload(f"{rng.getrandbits(64):016x}"))
    for _ in range(3):
        scheduler.run_cycle(state)
    model = runtimes.Model()
    for job in jobs[:300]:
        model.learn(job.queue_key, job.runtime)
    return state, model


async def _admission_passes(state: State, until: asyncio.Event) -> tuple[list[float], float]:
    """Cycles every 20 ms on the live state; their durations and the loop's worst lateness."""
    durations: list[float] = []
    worst = 0.0
    while not until.is_set():
        planned = time.perf_counter() + 0.02
        await asyncio.sleep(0.02)
        worst = max(worst, time.perf_counter() - planned)
        started = time.perf_counter()
        scheduler.run_cycle(state)
        durations.append(time.perf_counter() - started)
    return durations, worst


async def measure() -> Result:
    state, model = build()
    pending = len(forecast.pending_keys(state))
    admitted = sum(len(a) for a in state.admitted.values())

    idle = asyncio.Event()
    passes = asyncio.create_task(_admission_passes(state, idle))
    await asyncio.sleep(2.0)
    idle.set()
    idle_durations, idle_worst = await passes

    busy = asyncio.Event()
    passes = asyncio.create_task(_admission_passes(state, busy))
    await asyncio.sleep(0.1)
    started, cpu_started = time.perf_counter(), time.thread_time()
    snap = forecast.snapshot(state)  # on the loop, as StartEstimates.refresh takes it
    copy = model.copy()
    snapshot_seconds = time.perf_counter() - started
    snapshot_cpu = time.thread_time() - cpu_started
    estimates, cycles, forward_cpu = await asyncio.to_thread(_timed, snap, copy, None)
    forward_seconds = time.perf_counter() - started - snapshot_seconds
    busy.set()
    busy_durations, busy_worst = await passes
    budget = StartEstimates.budget_seconds
    bound = max(MIN_CYCLES, int(budget * cycles / forward_cpu / 5))  # as StartEstimates.max_cycles
    bounded, _, bounded_cpu = await asyncio.to_thread(_timed, snap, model.copy(), bound)
    return Result(
        pending=pending,
        admitted=admitted,
        snapshot_seconds=snapshot_seconds,
        snapshot_cpu=snapshot_cpu,
        forward_seconds=forward_seconds,
        estimated=len(estimates),
        cycles=cycles,
        budget_cycles=bound,
        budget_cpu=bounded_cpu,
        budget_estimated=len(bounded),
        idle_cycle_ms=statistics.median(idle_durations) * 1000,
        busy_cycle_ms=statistics.median(busy_durations) * 1000,
        idle_lateness_ms=idle_worst * 1000,
        busy_lateness_ms=busy_worst * 1000,
    )


def _timed(
    snap: forecast.Snapshot, model: runtimes.Model, bound: int | None
) -> tuple[dict[str, forecast.Estimate], int, float]:
    """A refresh's forward runs in this thread: the estimates, their cycles, their CPU seconds."""
    started = time.thread_time()
    found = forecast.estimate(snap, model, max_cycles=bound)
    return found, found.cycles, time.thread_time() - started


def report(result: Result) -> tuple[str, bool]:
    snapshot_ok = result.snapshot_cpu <= SNAPSHOT_TARGET
    allowed = result.idle_lateness_ms + (result.snapshot_seconds + LATENESS_SLACK) * 1000
    lateness_ok = result.busy_lateness_ms <= allowed
    text = (
        f"estimates: {result.pending:,} pending, {result.admitted} admitted; {result.estimated:,} estimated\n"
        f"  snapshot on the loop: {result.snapshot_cpu * 1000:.0f} ms CPU, {result.snapshot_seconds * 1000:.0f} ms wall"
        f" (target <= {SNAPSHOT_TARGET * 1000:.0f} ms CPU)"
        f"{'' if snapshot_ok else '  MISSED'}\n"
        f"  forward runs in a thread (estimate, low, high): {result.forward_seconds:.1f} s,"
        f" {result.cycles:,} cycles\n"
        f"  under the controller's budget ({StartEstimates.budget_seconds:g} s): expected run bounded at"
        f" {result.budget_cycles:,} cycles, {result.budget_cpu:.2f} s CPU,"
        f" {result.budget_estimated:,} of {result.pending:,} estimated\n"
        f"  admission cycles, median: {result.idle_cycle_ms:.1f} ms idle, {result.busy_cycle_ms:.1f} ms during a refresh\n"
        f"  loop's worst lateness: {result.idle_lateness_ms:.0f} ms idle, {result.busy_lateness_ms:.0f} ms during "
        f"a refresh (target <= idle + snapshot wall + {LATENESS_SLACK * 1000:.0f} ms){'' if lateness_ok else '  MISSED'}"
    )
    return text, snapshot_ok and lateness_ok


def main() -> int:
    text, ok = report(asyncio.run(measure()))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
