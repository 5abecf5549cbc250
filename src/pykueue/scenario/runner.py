"""Playing a scenario's steps on the engine, deterministically."""

from __future__ import annotations

from typing import Any

from pykueue.api.workload import Workload as ApiWorkload
from pykueue.engine import lifecycle, loading, scheduler
from pykueue.engine.events import PREEMPTED
from pykueue.engine.state import State
from pykueue.errors import ScenarioError
from pykueue.scenario import report
from pykueue.scenario.loader import CheckUpdate, Scenario, Step

MAX_SETTLE_CYCLES = 10_000


def run(scenario: Scenario) -> dict[str, Any]:
    """Run every step and return the result document (FORMAT.md's `scenario run --json`)."""
    state = State(config=scenario.config, now=scenario.now)
    for obj in scenario.objects:
        _apply(state, obj, scenario.path)
    checkpoints: list[dict[str, Any]] = []
    state.explain_waiting()
    for step in scenario.steps:
        if step.kind == "expect":
            checkpoints.append(report.snapshot(state, with_events=False))
            continue
        _play(state, step)
        state.explain_waiting()
    result = report.snapshot(state, with_events=True)
    result = {"format": 1, "name": scenario.name, **result}
    if checkpoints:
        result["checkpoints"] = checkpoints
    return result


def _apply(state: State, obj: Any, where: str, update: bool = False) -> None:
    """Apply one object; with ``update``, a known Workload given without a status keeps
    the status the engine holds (a spec update), as an API server would."""
    try:
        if update and isinstance(obj, ApiWorkload) and "status" not in obj.model_fields_set:
            loading.update_workload_spec(state, obj)
        else:
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
            _apply(state, obj, step.path, update=True)
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
    elif step.kind == "checks":
        # A workload's states of one step are one status write: the engine reacts once to all of them.
        by_workload: dict[str, list[tuple[str, str, str | None, int | None]]] = {}
        update: CheckUpdate
        for update in step.value:
            _require(state, update.workload, step.path)
            by_workload.setdefault(update.workload, []).append(
                (update.check, update.state, update.message, update.requeue_after_seconds)
            )
        for key, updates in by_workload.items():
            lifecycle.report_checks(state, key, updates)
    elif step.kind in ("podsReady", "podsNotReady"):
        for key in step.value:
            _require(state, key, step.path)
            lifecycle.report_pods_ready(state, key, step.kind == "podsReady")


def _require(state: State, key: str, where: str) -> None:
    if key not in state.workloads:
        raise ScenarioError(f"{where}: workload {key} does not exist")


def _require_admitted(state: State, key: str, where: str) -> None:
    _require(state, key, where)
    if state.workloads[key].admission is None:
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
        tuple((cq, tuple(keys)) for cq, keys in sorted(report.pending(state).items())),
        tuple((cq, tuple(keys)) for cq, keys in sorted(report.inadmissible(state).items())),
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
    """Move the clock to ``until``: admitted workloads whose runtime ends meanwhile finish,
    and PodsReady timeouts fire, each at its own time (a timeout first, at equal times)."""
    while True:
        due = [
            (wl.admitted_at + wl.runtime, wl.seq, wl.key)
            for wl in state.workloads.values()
            if wl.admission is not None and wl.runtime is not None and wl.admitted_at + wl.runtime <= until
        ]
        if not due:
            break
        end, _, key = min(due)
        lifecycle.advance(state, end)
        wl = state.workloads.get(key)
        if wl is not None and wl.admission is not None:
            state.finish(key)
    lifecycle.advance(state, until)


def preempted_keys(state: State) -> list[str]:
    return sorted({event.workload for event in state.events if event.type == PREEMPTED})
