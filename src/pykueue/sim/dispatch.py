"""MultiKueue's dispatch choices in virtual time: which workers get a copy, which copy wins.

Pure functions over names and integer microseconds, so the simulator's loop
(`pykueue.sim.multicluster`) stays about events. They follow what the
Kubernetes-mode check does (`pykueue.multikueue.dispatching`: `eligible`,
`winner`), restated here on the simulator's clock rather than on manifests and
wall-clock timestamps; the two should change together.

    AllAtOnce     every worker of the MultiKueueConfig gets a copy at once
    Incremental   the first `INCREMENTAL_STEP` workers by name, that many more
                  every `INCREMENTAL_ROUND` the workload waits for a winner
    winner        the copy that reserved quota first; a tie goes to the worker
                  listed first in the MultiKueueConfig
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pykueue.sim.jobs import SECOND

Dispatcher = Literal["AllAtOnce", "Incremental"]
ALL_AT_ONCE: Dispatcher = "AllAtOnce"
INCREMENTAL: Dispatcher = "Incremental"
# Upstream's dispatcher names, as a Configuration's multiKueue.dispatcherName writes them.
DISPATCHER_NAMES: dict[str, Dispatcher] = {
    "kueue.x-k8s.io/multikueue-dispatcher-all-at-once": ALL_AT_ONCE,
    "kueue.x-k8s.io/multikueue-dispatcher-incremental": INCREMENTAL,
}
INCREMENTAL_STEP = 3
INCREMENTAL_ROUND = 5 * 60 * SECOND


def eligible(dispatcher: Dispatcher, clusters: Sequence[str], waited: int) -> list[str]:
    """The workers that should hold a copy once the workload has waited ``waited`` microseconds
    for a winner since its quota reservation on the manager."""
    if dispatcher == ALL_AT_ONCE:
        return list(clusters)
    rounds = waited // INCREMENTAL_ROUND + 1
    return sorted(clusters)[: INCREMENTAL_STEP * rounds]


def next_round(dispatcher: Dispatcher, clusters: Sequence[str], waited: int) -> int | None:
    """How long after the reservation more workers become eligible; None when none will."""
    if dispatcher == ALL_AT_ONCE or len(eligible(dispatcher, clusters, waited)) >= len(clusters):
        return None
    return (waited // INCREMENTAL_ROUND + 1) * INCREMENTAL_ROUND


def winner(reserved: Mapping[str, int], order: Sequence[str]) -> str | None:
    """The worker whose copy reserved quota first (``reserved``: worker -> time), ties by ``order``."""
    ranked = [(at, order.index(name), name) for name, at in reserved.items() if name in order]
    return min(ranked)[2] if ranked else None
