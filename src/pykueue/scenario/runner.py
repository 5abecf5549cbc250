"""Playing a scenario's steps on the engine, deterministically."""

from __future__ import annotations

from typing import Any

from pykueue.engine import loading, scheduler
from pykueue.engine.state import PREEMPTED, State
from pykueue.errors import ScenarioError
from pykueue.scenario import report
from pykueue.scenario.loader import Scenario, Step

MAX_SETTLE_CYCLES = 10_000


def run(scenario: Scenario) -> dict[str, Any]:
    """Run every step and return the result document (FORMAT.md's `scenario run --json`)."""
    state = State(config=scenario.config)
    state.now = scenario.now
    for obj in scenario.objects:
        _apply(state, obj, scenario.path)
    checkpoints: list[dict[str, Any]] = []
    for step in scenario.steps:
        if step.kind == "expect":
            checkpoints.append(report.snapshot(state, with_events=False))
            continue
        _play(state, step)
    result = report.snapshot(state, with_events=True)
    result = {"format": 1, "name": scenario.name, **result}
    if checkpoints:
        result["checkpoints"] = checkpoints
    return result


def _apply(state: State, obj: Any, where: str) -> None:
    try:
        loading.apply(state, obj)
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def _play(state: State, step: Step) -> None:
    if step.kind == "cycle":
        for _ in range(step.value):
            scheduler.run_cycle(state)
    elif step.kind == "settle":
        settle(state, step.path)
    elif step.kind == "advance":
        advance(state, state.now + step.value)
    elif step.kind == "apply":
        for obj in step.value:
            _apply(state, obj, step.path)
    elif step.kind == "delete":
        for ref in step.value:
            loading.delete(state, str(ref["kind"]), str(ref.get("namespace") or ""), str(ref["name"]))
    elif step.kind == "finish":
        for key in step.value:
            _require_admitted(state, key, step.path)
            state.finish(key)
    elif step.kind == "evict":
        for key in step.value:
            _require_admitted(state, key, step.path)
            state.evict(key, "AdmissionCheck", "Evicted by the scenario (as by a failed admission check)")


def _require_admitted(state: State, key: str, where: str) -> None:
    wl = state.workloads.get(key)
    if wl is None:
        raise ScenarioError(f"{where}: workload {key} does not exist")
    if wl.admission is None:
        raise ScenarioError(f"{where}: workload {key} is not admitted")


def fingerprint(state: State) -> tuple[object, ...]:
    """Everything a next cycle depends on: placements, and where each flavor scan stands."""
    admitted = tuple(sorted(key for key, wl in state.workloads.items() if wl.admission is not None))
    scans = tuple(
        sorted(
            (key, tuple(sorted(wl.last_tried_flavor.items())))
            for key, wl in state.workloads.items()
            if wl.admission is None and wl.last_tried_flavor
        )
    )
    return (
        admitted,
        tuple((cq, tuple(keys)) for cq, keys in sorted(state.pending().items())),
        tuple((cq, tuple(keys)) for cq, keys in sorted(state.inadmissible().items())),
        scans,
    )


def settle(state: State, where: str = "settle") -> int:
    """Run cycles until one changes nothing; return how many ran.

    "Nothing" includes the flavor-scan positions kept between cycles, since the
    next cycle resumes from them. A head whose scan alternates between two
    positions without ever admitting or preempting brings the state back to one
    seen before: that is settled too.
    """
    seen = {fingerprint(state)}
    for count in range(1, MAX_SETTLE_CYCLES + 1):
        before = fingerprint(state)
        result = scheduler.run_cycle(state)
        after = fingerprint(state)
        if not result.changed and (after == before or after in seen):
            return count
        if result.changed:
            seen = set()
        seen.add(after)
    raise ScenarioError(f"{where}: did not settle within {MAX_SETTLE_CYCLES} cycles")


def advance(state: State, until: int) -> None:
    """Move the clock to ``until``; admitted workloads whose runtime ends meanwhile finish in time order."""
    while True:
        due = [
            (wl.admitted_at + wl.runtime, wl.seq, wl.key)
            for wl in state.workloads.values()
            if wl.admission is not None and wl.runtime is not None and wl.admitted_at + wl.runtime <= until
        ]
        if not due:
            break
        end, _, key = min(due)
        state.advance_clock(end)
        state.finish(key)
    state.advance_clock(until)


def preempted_keys(state: State) -> list[str]:
    return sorted({event.workload for event in state.events if event.type == PREEMPTED})
