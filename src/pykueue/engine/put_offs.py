"""Preemptions put off by a preemption-cost policy (``maxLostWork``/``putOffFor``,
docs/governance.md), and when each is tried again.

A preemptor whose victims would lose too much waits, parked like a workload without
candidates, for at most ``putOffFor``. Nothing else may happen on its cohort tree in that
time, so the end of each put-off is kept here: the controllers and the simulator wake up
then (`lifecycle.next_deadline`) and the scheduler unparks the preemptor's queue
(`scheduler.run_cycle`). Only the engine's own state, no clock: times are given.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class PutOffs:
    """Workload key -> (its ClusterQueue, when its put-off ends), microseconds."""

    _until: dict[str, tuple[str, int]] = field(default_factory=dict)

    def note(self, key: str, cluster_queue: str, until: int) -> None:
        """``key``'s preemption waits until ``until`` (a later note replaces an earlier one)."""
        self._until[key] = (cluster_queue, until)

    def due(self, now: int) -> set[str]:
        """The workloads whose put-off ends by ``now`` and is not yet taken (`take_due`)."""
        return {key for key, (_, until) in self._until.items() if until <= now}

    def deadlines(self, now: int) -> list[int]:
        """The ends still to come after ``now``."""
        return [until for _, until in self._until.values() if until > now]

    def take_due(self, now: int) -> list[str]:
        """Forget the put-offs that end by ``now``; their ClusterQueues, sorted, once each."""
        due = sorted(key for key, (_, until) in self._until.items() if until <= now)
        queues = {self._until.pop(key)[0] for key in due}
        return sorted(queues)
