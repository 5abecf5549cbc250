"""The engine's decisions in words: what the audit trail, the metrics and scenario outputs read.

`State` records an `Event` for every decision it or the scheduling cycle makes
(`State.record`); whoever reads them clears the list (`State.clear_events`).
The event types are upstream's event reasons where upstream has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykueue.engine.resources import Quantities

# Event types. ADMITTED is a quota reservation (its reason says whether the workload is
# Admitted at once, "Admitted", or waits for admission checks, "QuotaReserved").
ADMITTED = "Admitted"
PREEMPTED = "Preempted"
PENDING = "Pending"
FINISHED = "Finished"
EVICTED = "Evicted"
# A reservation that waited for its admission checks became Admitted (waited: since the
# reservation).
CHECKS_PASSED = "AdmissionChecksPassed"
# PodsReady became True (reason Started or Recovered; waited: since Admitted).
PODS_READY = "PodsReady"


@dataclass(frozen=True, slots=True)
class Event:
    """One decision, in words, for the audit trail and the scenario output."""

    cycle: int
    workload: str
    type: str
    message: str
    reason: str = ""
    # Evicted: the ClusterQueue the workload was admitted to (it may route nowhere afterwards).
    cluster_queue: str = ""
    # Evicted: upstream's underlying_cause label (WaitForStart, WaitForRecovery,
    # AdmissionCheck, RequeuingLimitExceeded); "" for none.
    underlying_cause: str = ""
    # CHECKS_PASSED, PODS_READY: the wait the metric histograms observe, microseconds;
    # EVICTED: how long the pods had been ready (None when they were not).
    waited: int | None = None
    # PREEMPTED: the quota the stopped run held (milli-units) and for how long, microseconds
    # since its reservation: the work a preemption may have thrown away.
    held: Quantities = field(default_factory=dict)
    held_for: int = 0
    # PREEMPTED: the part of ``held_for`` no declared checkpoint saved (engine/lost_work.py).
    lost_for: int = 0
