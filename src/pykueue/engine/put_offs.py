"""Preemptions put off by a preemption-cost policy (``maxLostWork``/``putOffFor``,
docs/governance.md), and when each is tried again; and, for the pending message, why a
preemptor's last try stopped nothing.

A preemptor whose victims would lose too much waits, parked like a workload without
candidates, for at most ``putOffFor``. Nothing else may happen on its cohort tree in that
time, so the end of each put-off is kept here: the controllers and the simulator wake up
then (`lifecycle.next_deadline`) and the scheduler unparks the preemptor's queue
(`scheduler.run_cycle`). Only the engine's own state, no clock: times are given.

The words a policy's decision adds to the preemptor's ``QuotaReserved`` message are kept for
the cycle that made it only (`explain`, `explained`): a reason of an earlier cycle must not
outlive the decision, and one cycle's worth is all that is ever held.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from pykueue.api import governance

# What every put-off's and wait's sentence starts with (`pending_causes` files them under
# the "policy" cause by it).
POLICY_WORDS = "preemption-cost policy of"

_MINUTE, _SECOND = 60 * 10**6, 10**6


@dataclass(slots=True)
class PutOffs:
    """Workload key -> (its ClusterQueue, when its put-off ends), microseconds."""

    _until: dict[str, tuple[str, int]] = field(default_factory=dict)
    _why: dict[str, str] = field(default_factory=dict)  # this cycle's words, by workload key
    _why_cycle: int = -1

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

    def explain(self, key: str, cycle: int, words: str) -> None:
        """In scheduling cycle ``cycle``, a preemption-cost policy kept ``key`` from preempting,
        for the reason ``words`` (`put_off_words`, `waits_for_end_words`)."""
        if cycle != self._why_cycle:
            self._why.clear()
            self._why_cycle = cycle
        self._why[key] = words

    def explained(self, key: str, cycle: int, message: str) -> str:
        """``message`` (the preemptor's pending message of cycle ``cycle``) with the reason a
        policy gave in that cycle added, if one did."""
        words = self._why.get(key, "") if cycle == self._why_cycle else ""
        if not words:
            return message
        return f"{message}; {words}" if message else words


def put_off_words(owner: str, lost: int, max_lost: int, until: int) -> str:
    """Why a preemption is put off (`Preemptor._put_off`): whose policy, the work its victims
    would lose against ``maxLostWork``, and until when."""
    # In whole minutes: the loss grows while it waits, and a message that changed with every
    # cycle would rewrite the condition each time.
    shown = lost if lost < _MINUTE else lost // _MINUTE * _MINUTE
    return (
        f"preemption put off by the {POLICY_WORDS} {owner}: its victims would lose "
        f"{duration_text(shown)} of work this workload's size, more than maxLostWork "
        f"{duration_text(max_lost)}; it preempts at {moment_text(until)} (putOffFor) unless "
        "quota frees first"
    )


def waits_for_end_words(owner: str, victims: int, last_end: int, wait_for_end: int) -> str:
    """Why a preemptor stops nothing and waits for victims that end soon by their declared limit."""
    return (
        f"preemption waits, by the {POLICY_WORDS} {owner} (waitForEnd {duration_text(wait_for_end)}), "
        f"for {victims} workload(s) whose declared limit ends them by {moment_text(last_end)}"
    )


def duration_text(micros: int) -> str:
    """Microseconds as the policy's fields are written: 8h, 1h30m, 45m, 20s (whole seconds)."""
    return governance.duration_text(max(micros, 0) // _SECOND * _SECOND)


def moment_text(micros: int) -> str:
    """A time of the engine's clock (microseconds since the epoch), in RFC 3339."""
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
