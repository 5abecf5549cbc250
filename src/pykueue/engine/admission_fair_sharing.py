"""Admission fair sharing: ordering a ClusterQueue's workloads by their LocalQueue's usage.

With ``admissionFairSharing`` configured and a ClusterQueue whose
``admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing``, the
LocalQueue that used the least recently goes first. A LocalQueue's usage is
its decayed consumption (``status.fairSharing.admissionFairSharingStatus``)
plus an *entry penalty* for each workload admitted since the last sample,
summed over resources with the configured weights (default 1, in whole
units: cores, bytes) and divided by the LocalQueue's ``fairSharing.weight``;
weight 0 puts a LocalQueue last.

Consumption decays with the half-life: after ``t`` of time the old value
keeps ``0.5 ** (t / halfLife)`` and the LocalQueue's current usage (its
admitted workloads) fills the rest, as upstream's LocalQueue controller does
on every sampling interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pykueue.engine.config import AdmissionFairSharing
from pykueue.engine.specs import LocalQueue
from pykueue.engine.workloads import Workload


def alpha(elapsed: float, half_life: float) -> float:
    """The weight the newest sample gets after ``elapsed`` (same unit as ``half_life``)."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


@dataclass(slots=True)
class Ledger:
    """Consumption and pending penalties of every LocalQueue, in whole units."""

    config: AdmissionFairSharing
    consumed: dict[str, dict[str, float]] = field(default_factory=dict)
    penalty: dict[str, dict[str, float]] = field(default_factory=dict)
    last_update: dict[str, int] = field(default_factory=dict)

    def load(self, lq: LocalQueue, now: int) -> None:
        """Take a LocalQueue's recorded consumption (milli-units in, units kept)."""
        self.consumed[lq.key] = {res: value / 1000 for res, value in lq.consumed.items()}
        self.last_update[lq.key] = lq.consumed_at if lq.consumed_at is not None else now

    def usage(self, lq_key: str, weight: float) -> float:
        merged = dict(self.consumed.get(lq_key, {}))
        for res, value in self.penalty.get(lq_key, {}).items():
            merged[res] = merged.get(res, 0.0) + value
        total = 0.0
        for res in sorted(merged):
            total += self.config.resource_weights.get(res, 1.0) * merged[res]
        if weight <= 0:
            return math.inf
        return total / weight

    def charge_admission(self, wl: Workload) -> None:
        """Add the entry penalty of a just-admitted workload to its LocalQueue."""
        factor = alpha(self.config.sampling_interval, self.config.usage_half_life)
        bucket = self.penalty.setdefault(wl.queue_key, {})
        for res, value in wl.total_requests().items():
            bucket[res] = bucket.get(res, 0.0) + value / 1000 * factor

    def decay(self, lq_key: str, current: dict[str, int], now: int) -> None:
        """Fold the LocalQueue's current usage into its consumption up to ``now``."""
        last = self.last_update.get(lq_key, now)
        if now <= last:
            return
        factor = alpha(now - last, self.config.usage_half_life)
        old = self.consumed.get(lq_key, {})
        merged = {res: value * (1 - factor) for res, value in old.items()}
        for res, value in current.items():
            merged[res] = merged.get(res, 0.0) + value / 1000 * factor
        self.consumed[lq_key] = merged
        self.penalty.pop(lq_key, None)
        self.last_update[lq_key] = now


def requests_by_local_queue(
    workloads: Iterable[Workload], counted: Callable[[str], bool]
) -> dict[str, dict[str, int]]:
    """What the admitted workloads of the ClusterQueues ``counted`` names request, per LocalQueue:
    the usage each LocalQueue's consumption decays toward."""
    current: dict[str, dict[str, int]] = {}
    for wl in workloads:
        if wl.admission is not None and counted(wl.admission.cluster_queue):
            bucket = current.setdefault(wl.queue_key, {})
            for res, value in wl.total_requests().items():
                bucket[res] = bucket.get(res, 0) + value
    return current
