"""The engine's configuration: the parts of Kueue's Configuration that change decisions."""

from __future__ import annotations

from dataclasses import dataclass, field

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


@dataclass(frozen=True, slots=True)
class FairSharing:
    enable: bool = False
    preemption_strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    enable: bool = False
    usage_half_life: int = 168 * 3600 * 10**6  # microseconds
    sampling_interval: int = 5 * 60 * 10**6
    resource_weights: dict[str, float] = field(default_factory=dict)


DEFAULT_GATES: dict[str, bool] = {
    "PartialAdmission": True,
    "AdmissionFairSharing": True,
    "PrioritySortingWithinCohort": True,
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "SchedulingEquivalenceHashing": True,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    "PrioritizePreemptorWorkloads": False,
}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    fair_sharing: FairSharing = FairSharing()
    admission_fair_sharing: AdmissionFairSharing | None = None
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # pykueue's own: within a cycle, once a ClusterQueue admits within its nominal quota and
    # still has room there, heads that would borrow the same flavor-resources in its cohort
    # tree wait for the next cycle (docs/semantics.md, "Nominal quota first"). Off reproduces
    # upstream's cycle exactly; scenario files get it only when they ask.
    nominal_first: bool = True

    def gate(self, name: str) -> bool:
        return self.feature_gates.get(name, DEFAULT_GATES.get(name, False))
