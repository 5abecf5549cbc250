"""Divergences from upstream that are documented choices (docs/semantics.md, "Differences from upstream
found by differential testing"). Each entry recognises its divergence from the differences at the first
checkpoint that differs; a divergence that none recognises is undocumented."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Known:
    name: str
    docs: str  # the heading in docs/semantics.md
    matches: Callable[
        [dict[str, Any], dict[str, Any], dict[str, Any]], bool
    ]  # (case, pykueue view, upstream view)


KNOWN: list[Known] = []

# Upstream never settles: a victim and its preemptor take the quota from each other cycle after cycle.
# pykueue lets the preemptor go first and stops the loop (docs/semantics.md, "A victim and its preemptor in
# the next cycle"); recognised by the driver when upstream does not settle and one Workload was preempted
# at least this many times.
PREEMPTION_LOOP = Known(
    "upstream's preemption loop between a victim and its preemptor (kubernetes-sigs/kueue#14543)",
    "Choices a user will notice: A victim and its preemptor in the next cycle",
    lambda case, ours, theirs: False,
)
LOOP_PREEMPTIONS = 3


def classify(case: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> Known | None:
    for known in KNOWN:
        if known.matches(case, ours, theirs):
            return known
    return None
