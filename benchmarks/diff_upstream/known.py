"""Divergences from upstream that are documented choices (docs/semantics.md, "Differences from upstream
found by differential testing"). Each entry recognises its divergence at the first checkpoint that
differs (by the pykueue case, that checkpoint's index and upstream's view there); a divergence that none
recognises is undocumented."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.diff_upstream import compare
from pykueue.engine.config import CREATION_TIMESTAMP
from pykueue.errors import ScenarioError
from pykueue.scenario import loader, runner


@dataclass(frozen=True)
class Known:
    name: str
    docs: str  # the heading in docs/semantics.md
    # (the pykueue case, the checkpoint's index, upstream's view there) -> is it this divergence
    matches: Callable[[dict[str, Any], int, dict[str, Any]], bool]


def _same_in_creation_order(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """Played with upstream's queue order of evicted workloads, pykueue agrees with upstream there."""
    scenario = loader.parse(doc, str(doc.get("name", "case")))
    config = dataclasses.replace(scenario.config, requeue_order=CREATION_TIMESTAMP)
    try:
        result = runner.run(dataclasses.replace(scenario, config=config))
    except ScenarioError:
        return False
    checkpoints = result.get("checkpoints", [])
    if checkpoint >= len(checkpoints):
        return False
    return not compare.differences(compare.from_pykueue(checkpoints[checkpoint]), theirs)


# The scenario format queues a preempted workload at its eviction time; upstream v0.19.2 keeps its
# creation time. `EngineConfig.requeue_order` "Creation" is upstream's rule: the case is this one when
# that alone makes the two sides agree.
REQUEUE_ORDER = Known(
    "a preempted workload's place in its queue (eviction time here, creation time upstream)",
    "Choices a user will notice: Queue time of an evicted workload",
    _same_in_creation_order,
)

KNOWN: list[Known] = [REQUEUE_ORDER]

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


def classify(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> Known | None:
    for known in KNOWN:
        if known.matches(doc, checkpoint, theirs):
            return known
    return None
