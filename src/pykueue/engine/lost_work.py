"""What a preemption destroys: the work a victim loses, and when it would end anyway.

Used by cost-aware preemption (`pykueue.engine.preemption`, the ClusterQueue annotation
``pykueue.io/preemption-cost``, docs/governance.md) and by the views and reports that count
lost work. Pure arithmetic over a workload and a time: no state.

* **Lost time**: the run since its quota reservation; with a declared checkpoint interval
  (``pykueue.io/checkpoint-interval``) only the part since the last checkpoint, counted from
  the reservation (a run that restarts after a preemption restarts from a checkpoint).
* **Lost work**: the quota it holds times its lost time, per resource (resource-microseconds,
  milli-units for CPU as the engine counts quota).
* **Declared end**: when its declared limit (``spec.maximumExecutionTimeSeconds``, less what
  earlier admissions used) stops it at the latest; None without a limit.
"""

from __future__ import annotations

from collections.abc import Mapping

from pykueue.engine import execution_time
from pykueue.engine.resources import FlavorResource
from pykueue.engine.workloads import Workload


def lost_time(wl: Workload, now: int) -> int:
    """Microseconds of ``wl``'s current run a preemption at ``now`` would throw away."""
    if wl.admission is None:
        return 0
    ran = max(0, now - wl.admitted_at)
    interval = wl.checkpoint_interval
    if interval is not None and interval > 0:
        return ran % interval
    return ran


def lost_by_resource(wl: Workload, now: int) -> dict[str, int]:
    """The work a preemption at ``now`` loses per resource: quota held x lost time."""
    lost = lost_time(wl, now)
    out: dict[str, int] = {}
    for (_, resource), value in wl.usage().items():
        out[resource] = out.get(resource, 0) + value * lost
    return out


def weight(wl: Workload, now: int, requests: Mapping[FlavorResource, int]) -> int:
    """One number to rank victims by: lost time x the victim's share of what is contended.

    Quantities of different resources are not comparable (bytes against GPUs), so each
    contended flavor-resource counts the victim's quota in units of the preemptor's request
    of it (milli-units to keep it whole): a 4-GPU victim of an 8-GPU preemptor weighs half
    of an 8-GPU one that ran as long.
    """
    lost = lost_time(wl, now)
    if lost == 0:
        return 0
    usage = wl.usage()
    share = 0
    for fr, wanted in requests.items():
        held = usage.get(fr, 0)
        if held:
            share += held * 1000 // max(1, wanted)
    return share * lost


def sized(wl: Workload, now: int, requests: Mapping[FlavorResource, int]) -> int:
    """The work a preemption at ``now`` loses, in microseconds of work the size of ``requests``
    (the preemptor's): lost time x the victim's largest share of a contended flavor-resource in
    units of the preemptor's request of it. A 64-GPU victim that would lose 15 minutes weighs
    8 hours to an 2-GPU preemptor; it is what ``maxLostWork`` is compared with."""
    lost = lost_time(wl, now)
    if lost == 0:
        return 0
    usage = wl.usage()
    share = max((usage.get(fr, 0) * 1000 // max(1, wanted) for fr, wanted in requests.items()), default=0)
    return share * lost // 1000


def declared_end(wl: Workload) -> int | None:
    """When ``wl``'s declared limit ends its current run at the latest (None: no limit):
    the moment the engine deactivates it (`execution_time.deadline`)."""
    return execution_time.deadline(wl)


def ends_by(wl: Workload, by: int) -> bool:
    """Does ``wl``'s declared limit end its current run by ``by`` (`PreemptionCost.wait_for_end`)?"""
    end = declared_end(wl)
    return end is not None and end <= by


def count(wl: Workload, held: Mapping[FlavorResource, int], lost: int) -> None:
    """Add to ``wl``'s lost work what a preemption losing ``lost`` microseconds of a run that
    held ``held`` throws away."""
    if lost <= 0 or not held:
        return
    total = dict(wl.lost_work or {})
    for (_, resource), value in held.items():
        total[resource] = total.get(resource, 0) + value * lost
    wl.lost_work = total


def words(lost: Mapping[str, int]) -> str:
    """Lost work in resource-hours, e.g. "8.67 nvidia.com/gpu-hours, 34.7 cpu-hours" (memory
    and storage in GiB-hours)."""
    hours = 3600 * 10**6 * 1000
    parts = []
    for resource, value in sorted(lost.items()):
        if not value:
            continue
        if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
            parts.append(f"{value / hours / 2**30:.3g} {resource}(GiB)-hours")
        else:
            parts.append(f"{value / hours:.3g} {resource}-hours")
    return ", ".join(parts)
