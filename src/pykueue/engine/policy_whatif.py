"""What would change if the policies were others: two forward runs from one snapshot.

    snapshot ──restore──▶ as is         ──forecast.outcomes──▶ admissions, preemptions
             ──restore──▶ with changes  ──forecast.outcomes──▶ admissions, preemptions
                                                     compare ▶ one Difference per workload whose fate differs

Used by `pykueue policy rollback` to show, before anything is applied, which workloads
would be admitted or preempted differently under the rolled-back policies. Both runs
assume what the forecast assumes (nothing new arrives, running times as the model
expects), so the answer is a comparison of two plays of the same future, not a promise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykueue.engine import forecast, loading
from pykueue.engine.runtimes import SECOND, Model
from pykueue.engine.state import State

# A change to the policies: kind, namespace, name and the parsed API object (None: deleted).
Change = tuple[str, str, str, Any]


@dataclass(frozen=True, slots=True)
class Fate:
    """What happens to one workload in one forward run (times in microseconds from now)."""

    running: bool  # admitted when the snapshot was taken
    admitted_in: int | None  # None: not admitted within the horizon (or already running)
    preempted_in: int | None  # None: not preempted within the horizon

    def text(self, horizon: int) -> str:
        if self.running and self.preempted_in is None:
            return f"keeps running (not preempted within {_duration(horizon)})"
        parts = []
        if self.admitted_in is not None:
            parts.append(f"admitted {_after(self.admitted_in)}")
        if self.preempted_in is not None:
            parts.append(f"preempted {_after(self.preempted_in)}")
        return ", ".join(parts) or f"not admitted within {_duration(horizon)}"


@dataclass(frozen=True, slots=True)
class Difference:
    workload: str  # namespace/name
    queue: str  # its LocalQueue, namespace/name
    now: str  # its fate under the current policies
    after: str  # its fate under the changed ones


def compare(
    snap: forecast.Snapshot, model: Model, changes: Sequence[Change], horizon: int
) -> list[Difference]:
    """Workloads whose fate differs between the snapshot's policies and the changed ones."""
    end = snap.now + horizon
    current = forecast.restore(snap)
    keys = _queue_keys(current)
    as_is = forecast.outcomes(current, model, end)
    changed_state = forecast.restore(snap)
    stopped_at_once = _apply(changed_state, changes)
    keys.update(_queue_keys(changed_state))
    changed = forecast.outcomes(changed_state, model, end)
    for key in stopped_at_once:
        changed.preempted.setdefault(key, snap.now)
    running = {wl.key for wl in snap.workloads if wl.admission is not None}
    out = []
    for key in sorted(set(keys) | set(as_is.preempted) | set(changed.preempted)):
        before = _fate(as_is, key, snap.now, key in running)
        after = _fate(changed, key, snap.now, key in running)
        if before != after:
            out.append(Difference(key, keys.get(key, ""), before.text(horizon), after.text(horizon)))
    return out


def _queue_keys(state: State) -> dict[str, str]:
    return {key: wl.queue_key for key, wl in state.workloads.items()}


def _apply(state: State, changes: Sequence[Change]) -> list[str]:
    """Apply the changes; a stop that evicts takes effect at once. Returns the workloads evicted."""
    held = [key for key, wl in state.workloads.items() if wl.admission is not None]
    for kind, namespace, name, obj in changes:
        if obj is None:
            loading.delete(state, kind, namespace, name)
        else:
            loading.apply(state, obj)
    for wl in list(state.workloads.values()):
        if wl.eviction is not None:
            state.complete_eviction(wl.key)  # the what-if does not wait for a job to stop
    state.clear_events()
    state.clear_touched()
    return [key for key in held if key in state.workloads and state.workloads[key].admission is None]


def _fate(outcomes: forecast.Outcomes, key: str, now: int, running: bool) -> Fate:
    admitted = outcomes.admitted.get(key)
    preempted = outcomes.preempted.get(key)
    return Fate(
        running,
        None if admitted is None else admitted - now,
        None if preempted is None else preempted - now,
    )


def _after(micros: int) -> str:
    return "now" if micros < SECOND else f"in {_duration(micros)}"


def _duration(micros: int) -> str:
    seconds = micros // SECOND
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds // 86400}d"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
