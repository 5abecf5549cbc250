"""Whether a ClusterQueue may admit, and if not why, in upstream's reasons and words.

An inactive ClusterQueue keeps its workloads queued but admits none of them; its
``Active`` condition carries the first reason, its message every one.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from pykueue.engine import specs


def inactive(
    cq: specs.ClusterQueue,
    flavors: Mapping[str, specs.ResourceFlavor],
    checks: Mapping[str, specs.AdmissionCheck],
    cohorts_in_cycles: Set[str],
) -> tuple[str, str] | None:
    """(reason, message) when ``cq`` cannot admit, None when it can."""
    reasons: list[tuple[str, str]] = []
    if cq.stop_policy != "None":
        reasons.append(("Stopped", "is stopped"))
    missing = [f for f in cq.flavors() if f not in flavors]
    if missing:
        reasons.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {','.join(missing)}"))
    unknown = [c for c in cq.admission_checks if c not in checks]
    if unknown:
        reasons.append(
            ("AdmissionCheckNotFound", f"references missing AdmissionCheck(s): {','.join(unknown)}")
        )
    off = [c for c in cq.admission_checks if c in checks and not checks[c].active]
    if off:
        reasons.append(("AdmissionCheckInactive", f"references inactive AdmissionCheck(s): {','.join(off)}"))
    if cq.cohort in cohorts_in_cycles:
        reasons.append(("CohortCycle", f"is in cohort {cq.cohort}, whose parents form a cycle"))
    if not reasons:
        return None
    return reasons[0][0], f"Can't admit new workloads: {', '.join(message for _, message in reasons)}."
