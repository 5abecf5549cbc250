"""The MultiKueue check's planning, pure: which workers get a Workload, which one wins, what each keeps.

The controller (`multikueue.controller`) observes the manager and its workers and
makes the writes; these functions decide from what it saw: whether one of its
AdmissionChecks is active (`check_active`), which workers a waiting Workload goes to
(`eligible`, by the dispatcher: AllAtOnce, Incremental or External), which worker won
(`winner`: the first whose copy reserved quota), whether a worker's copy fell out of
sync (`out_of_sync`) and whether a worker should keep its copy (`copy_wanted`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Literal

from pykueue.multikueue import messages as multikueue_messages
from pykueue.reconcilers import jobframework
from pykueue.store.base import Manifest

CONFIG_KIND = "MultiKueueConfig"
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# Incremental dispatch: this many more workers each round, a round lasting this long.
INCREMENTAL_STEP = 3
INCREMENTAL_ROUND = timedelta(minutes=5)

Dispatcher = Literal["AllAtOnce", "Incremental", "External"]


def conditions_of(obj: Manifest | None) -> list[Manifest]:
    return list(((obj or {}).get("status") or {}).get("conditions") or [])


def condition(obj: Manifest | None, kind: str) -> Manifest | None:
    return next((c for c in conditions_of(obj) if c.get("type") == kind), None)


def is_true(obj: Manifest | None, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def config_name(check: Manifest) -> str | None:
    """The MultiKueueConfig an AdmissionCheck names, or None when its parameters name none."""
    params = (check.get("spec") or {}).get("parameters") or {}
    if params.get("apiGroup") != "kueue.x-k8s.io" or params.get("kind") != CONFIG_KIND:
        return None
    return str(params.get("name") or "") or None


def check_active(
    check: Manifest, configs: Mapping[str, Manifest], active: set[str], known: set[str] | None = None
) -> tuple[bool, str, str]:
    """(status, reason, message) of one of our AdmissionChecks' Active condition; ``known``: the
    MultiKueueClusters that exist (a config's other clusters are missing), None: all exist."""
    name = config_name(check)
    if name is None:
        return False, "BadParametersRef", "spec.parameters must name a kueue.x-k8s.io MultiKueueConfig"
    config = configs.get(name)
    if config is None:
        return False, "BadParametersRef", f'multikueueconfigs.kueue.x-k8s.io "{name}" not found'
    clusters = list((config.get("spec") or {}).get("clusters") or [])
    missing = [c for c in clusters if known is not None and c not in known]
    inactive = [c for c in clusters if c not in active and c not in missing]
    message = multikueue_messages.unusable_clusters(missing, inactive)
    if len(missing) + len(inactive) == len(clusters):
        return False, "NoUsableClusters", message
    if missing or inactive:
        return True, "SomeActiveClusters", message
    return True, "Active", "The admission check is active"


def eligible(
    dispatcher: Dispatcher,
    clusters: Sequence[str],
    active: set[str],
    workload: Manifest,
    reserved_for: timedelta,
) -> list[str]:
    """The workers that should hold a copy of a Workload waiting for a winner.

    AllAtOnce: every active worker of the config. Incremental: the first
    ``INCREMENTAL_STEP`` in the config's order (upstream v0.19.2's default,
    MultiKueueIncrementalDispatcherRespectConfigOrder), that many more each
    ``INCREMENTAL_ROUND`` the Workload waits. External: the ones ``status.nominatedClusterNames`` lists (another controller
    writes it).
    """
    usable = [c for c in clusters if c in active]
    if dispatcher == "AllAtOnce":
        return usable
    if dispatcher == "Incremental":
        rounds = int(reserved_for / INCREMENTAL_ROUND) + 1
        return usable[: INCREMENTAL_STEP * rounds]
    nominated = set((workload.get("status") or {}).get("nominatedClusterNames") or [])
    return [c for c in usable if c in nominated]


def winner(remote: Mapping[str, Manifest | None], order: Sequence[str]) -> str | None:
    """The worker whose Workload reserved quota first (ties: the config's order), or None."""
    reserved = []
    for position, name in enumerate(order):
        found = condition(remote.get(name), "QuotaReserved")
        if found is not None and found.get("status") == "True":
            reserved.append((str(found.get("lastTransitionTime") or ""), position, name))
    return min(reserved)[2] if reserved else None


def out_of_sync(remote: Manifest | None) -> str | None:
    """The message of a worker's Workload finished OutOfSync (the worker's Kueue found it does not
    describe the job sent with it, and will never run it), or None."""
    found = condition(remote, "Finished")
    if found is None or found.get("status") != "True" or found.get("reason") != jobframework.OUT_OF_SYNC:
        return None
    return str(found.get("message") or jobframework.OUT_OF_SYNC)


def copy_wanted(workload: Manifest | None, cluster: str, check_state: str | None) -> bool:
    """Whether a worker should keep its copy of the manager's Workload ``workload``."""
    if workload is None or is_true(workload, "Finished") or is_true(workload, "Evicted"):
        return False
    if not (workload.get("status") or {}).get("admission"):
        return False
    elected = (workload.get("status") or {}).get("clusterName")
    if check_state == "Ready" and elected:
        return bool(cluster == elected)
    return check_state in ("Pending", "Ready")
