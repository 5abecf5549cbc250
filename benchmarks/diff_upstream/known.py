"""Divergences from upstream that are documented choices or a recurrent timing of upstream's
(docs/semantics.md, "Differences from upstream found by differential testing"). Each entry recognises its
divergence at the first checkpoint that differs (by the pykueue case, that checkpoint's index and upstream's
view there); a divergence that none recognises is undocumented."""

from __future__ import annotations

import copy
import dataclasses
import itertools
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


def _ours(doc: dict[str, Any], checkpoint: int, creation_order: bool = False) -> dict[str, Any] | None:
    """pykueue's view at the checkpoint (with upstream's queue order of evicted workloads if asked)."""
    scenario = loader.parse(doc, str(doc.get("name", "case")))
    if creation_order:
        config = dataclasses.replace(scenario.config, requeue_order=CREATION_TIMESTAMP)
        scenario = dataclasses.replace(scenario, config=config)
    try:
        result = runner.run(scenario)
    except ScenarioError:
        return None
    checkpoints = result.get("checkpoints", [])
    if checkpoint >= len(checkpoints):
        return None
    return compare.from_pykueue(checkpoints[checkpoint])


def _same_in_creation_order(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """Played with upstream's queue order of evicted workloads, pykueue agrees with upstream there."""
    ours = _ours(doc, checkpoint, creation_order=True)
    return ours is not None and not compare.differences(ours, theirs)


def _blocked_cycle_holds_heads(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """Upstream's cycle is blocked by blockAdmission (a head shows `WaitingForPodsReady`), and pykueue agrees
    once the other heads of that cycle are taken as upstream holds them: in their active queue, their status
    not written (no reason, or the one an earlier step gave)."""
    wait = (doc.get("config") or {}).get("waitForPodsReady") or {}
    if not wait.get("blockAdmission") or "WaitingForPodsReady" not in theirs["pendingReason"].values():
        return False
    ours = _ours(doc, checkpoint)
    if ours is None:
        return False
    held = [
        key
        for key in set(ours["pending"]) & set(theirs["pending"])
        if any(key in keys for keys in theirs["queues"]["active"].values())
    ]
    queues: dict[str, dict[str, list[str]]] = {"active": {}, "inadmissible": {}}
    for part, per_cq in ours["queues"].items():
        for cq, keys in per_cq.items():
            kept = [k for k in keys if k not in held]
            if kept:
                queues[part][cq] = kept
    for cq, keys in theirs["queues"]["active"].items():
        for key in keys:
            if key in held:
                queues["active"].setdefault(cq, []).append(key)
    # A held head shows what an earlier cycle wrote, if any: upstream's reason is taken for it.
    reasons = {k: v for k, v in ours["pendingReason"].items() if k not in held}
    reasons.update({k: v for k, v in theirs["pendingReason"].items() if k in held})
    patched = {
        **ours,
        "queues": {part: {cq: sorted(keys) for cq, keys in sorted(q.items())} for part, q in queues.items()},
        "pendingReason": reasons,
    }
    return not compare.differences(patched, theirs)


# The scenario format queues a preempted workload at its eviction time; upstream v0.19.2 keeps its
# creation time. `EngineConfig.requeue_order` "Creation" is upstream's rule: the case is this one when
# that alone makes the two sides agree.
REQUEUE_ORDER = Known(
    "a preempted workload's place in its queue (eviction time here, creation time upstream)",
    "Choices a user will notice: Queue time of an evicted workload",
    _same_in_creation_order,
)

# Upstream's scheduler waits for pods to be ready inside the cycle (blockAdmission), holding that cycle's other
# heads unrequeued and their status unwritten until it ends; pykueue ends the cycle, parking each with its
# reason.
BLOCKED_CYCLE = Known(
    "the other heads of a cycle blocked by waitForPodsReady.blockAdmission (held by upstream, parked here)",
    "Differences from upstream found by differential testing",
    _blocked_cycle_holds_heads,
)

# What follows from who got the quota a Retry check released.
_QUOTA_KEYS = {
    "admitted",
    "pending",
    "queues",
    "pendingReason",
    "clusterQueueUsage",
    "quotaOnly",
    "admissionChecks",
}


def _retried_one_round_late(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """The step before the checkpoint set a check `Retry` on a workload that pykueue admitted again and
    upstream left pending (its requeue waits for one more status write, after the quota it released has
    gone to the workloads behind it), and nothing but who holds the quota differs."""
    steps = [s for s in doc.get("steps", []) if "expect" not in s]
    settles = [i for i, s in enumerate(steps) if "settle" in s]
    if checkpoint == 0 or checkpoint >= len(settles):
        return False
    between = steps[settles[checkpoint - 1] + 1 : settles[checkpoint]]
    retried = {
        key
        for s in between
        for key, states in (s.get("checks") or {}).items()
        if any((v.get("state") if isinstance(v, dict) else v) == "Retry" for v in states.values())
    }
    ours = _ours(doc, checkpoint)
    if ours is None or not retried:
        return False
    if not any(k in ours["admitted"] and k in theirs["pending"] for k in retried):
        return False
    return all(d.split(" ", 1)[0].rstrip(":") in _QUOTA_KEYS for d in compare.differences(ours, theirs))


# Upstream's job framework (and the oracle's stand-in) answers an eviction by a Retry check with Requeued=False;
# the workload controller then sets it True and only that puts the workload back in its queue, so the quota
# it released goes to the workloads behind it first. pykueue requeues it at once, in its place.
RETRY_REQUEUE = Known(
    "a workload evicted by a Retry check is requeued after the quota it released went to others (upstream)",
    "Differences from upstream found by differential testing",
    _retried_one_round_late,
)


def _could_preempt_in_its_queue(doc: dict[str, Any], key: str, theirs: dict[str, Any]) -> bool:
    """`key` waits in a BestEffortFIFO ClusterQueue that preempts within itself, for quota
    (WaitingForQuota), while a Workload of lower priority holds quota there."""
    by_key = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
        for o in doc["objects"]
        if o["kind"] == "Workload"
    }
    cqs = {o["metadata"]["name"]: o["spec"] for o in doc["objects"] if o["kind"] == "ClusterQueue"}
    lqs = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
        for o in doc["objects"]
        if o["kind"] == "LocalQueue"
    }
    wl = by_key.get(key)
    if wl is None or theirs["pendingReason"].get(key) != "WaitingForQuota":
        return False
    cq = lqs.get((wl["metadata"]["namespace"], wl["spec"].get("queueName", "")))
    spec = cqs.get(cq or "")
    if spec is None or spec.get("queueingStrategy", "BestEffortFIFO") != "BestEffortFIFO":
        return False
    if (spec.get("preemption") or {}).get("withinClusterQueue", "Never") == "Never":
        return False
    priority = wl["spec"].get("priority", 0)
    return any(
        adm["clusterQueue"] == cq and other in by_key and by_key[other]["spec"].get("priority", 0) < priority
        for other, adm in theirs["admitted"].items()
    )


def _retried_after_nomination(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """All that differs is that Workloads pykueue parks as inadmissible are in upstream's active queue,
    each one waiting for quota in a BestEffortFIFO ClusterQueue where it could preempt."""
    ours = _ours(doc, checkpoint)
    if ours is None:
        return False
    diffs = compare.differences(ours, theirs)
    if not diffs or any(not d.startswith("queues ") for d in diffs):
        return False
    moved: set[str] = set()
    for cq in set(ours["queues"]["active"]) | set(theirs["queues"]["active"]):
        our_active = set(ours["queues"]["active"].get(cq, []))
        their_active = set(theirs["queues"]["active"].get(cq, []))
        if not our_active <= their_active:
            return False
        moved |= their_active - our_active
    for cq, keys in ours["queues"]["inadmissible"].items():
        if set(keys) - moved != set(theirs["queues"]["inadmissible"].get(cq, [])):
            return False
    return bool(moved) and all(_could_preempt_in_its_queue(doc, key, theirs) for key in moved)


# Upstream nominates such a Workload with preemption targets, finds at admission that it does not fit,
# and requeues it at once ("no longer fits after processing another workload", FailedAfterNomination), so
# it is retried in every cycle and stays in its active queue; pykueue parks it until something changes.
RETRIED_AFTER_NOMINATION = Known(
    "a Workload waiting for quota that it could preempt for: retried in every cycle upstream, parked here",
    "Differences from upstream found by differential testing",
    _retried_after_nomination,
)


def _checkpoint_cut(doc: dict[str, Any], checkpoint: int) -> int | None:
    """The index in `doc["steps"]` of the `settle` that ends at the checkpoint."""
    settles = [i for i, s in enumerate(doc.get("steps", [])) if "settle" in s]
    return settles[checkpoint] if checkpoint < len(settles) else None


def _retried_once_more(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """pykueue agrees once every parked Workload is retried one more time at the end of the checkpoint's
    settle: each ClusterQueue applied again unchanged (which unparks its cohort tree), then a settle."""
    cut = _checkpoint_cut(doc, checkpoint)
    if cut is None:
        return False
    steps = doc["steps"]
    latest = {o["metadata"]["name"]: o for o in doc["objects"] if o["kind"] == "ClusterQueue"}
    for step in steps[:cut]:
        for obj in step.get("apply") or []:
            if obj.get("kind") == "ClusterQueue":
                latest[obj["metadata"]["name"]] = obj
    if not latest:
        return False
    retried = copy.deepcopy(doc)
    again = [{"apply": [copy.deepcopy(o) for o in latest.values()]}, {"settle": {}}]
    retried["steps"] = [*steps[: cut + 1], *again, *steps[cut + 1 :]]
    ours = _ours(retried, checkpoint)  # the retry comes before the checkpoint's `expect`
    return ours is not None and not compare.differences(ours, theirs)


# Upstream's queue manager, once started, retries every parked Workload once more a second later (its
# ClusterQueues' addition asks for it, batched by the requeue period of 1 s); the driver starts the oracle
# at every settle, so a Workload parked in the first second of a settle is tried again. When the recorded
# scan progress sent it past its first flavor (FlavorFungibilityPreserveScanProgress), that retry scans all
# flavors and may show another reason. pykueue has no start: it parks the Workload with the first.
RETRIED_AFTER_START = Known(
    "a Workload parked in the first second of a settle is retried once more by upstream's freshly started "
    "queue manager (the driver restarts the oracle at every settle)",
    "Differences from upstream found by differential testing",
    _retried_once_more,
)


def _cluster_queue_of(doc: dict[str, Any]) -> dict[str, str]:
    """Each Workload's key -> its ClusterQueue (by its LocalQueue), over the objects and the steps."""
    lqs = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["clusterQueue"]
        for o in doc["objects"]
        if o["kind"] == "LocalQueue"
    }
    out: dict[str, str] = {}
    for obj in _workloads(doc):
        meta = obj["metadata"]
        cq = lqs.get((meta["namespace"], obj["spec"].get("queueName", "")))
        if cq is not None:
            out[f"{meta['namespace']}/{meta['name']}"] = cq
    return out


def _workloads(doc: dict[str, Any]) -> list[dict[str, Any]]:
    objs = [o for o in doc["objects"] if o["kind"] == "Workload"]
    for step in doc.get("steps", []):
        objs += [o for o in step.get("apply") or [] if isinstance(o, dict) and o.get("kind") == "Workload"]
    return objs


def _tied_queues(doc: dict[str, Any]) -> list[str]:
    """The ClusterQueues holding Workloads that tie with one of another ClusterQueue: the same priority and
    creation time (uids break such ties here, and nothing does in upstream's cycle)."""
    cq_of = _cluster_queue_of(doc)
    groups: dict[tuple[Any, Any], set[str]] = {}
    for obj in _workloads(doc):
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        if key in cq_of:
            tie = (obj["spec"].get("priority", 0), obj["metadata"].get("creationTimestamp"))
            groups.setdefault(tie, set()).add(cq_of[key])
    return sorted({cq for cqs in groups.values() if len(cqs) > 1 for cq in cqs})


def _ranked(doc: dict[str, Any], rank: dict[str, int]) -> dict[str, Any]:
    """The case with each Workload's uid prefixed by its ClusterQueue's rank: the order within a ClusterQueue
    stays, ties across ClusterQueues go by the rank."""
    out = copy.deepcopy(doc)
    cq_of = _cluster_queue_of(out)
    for obj in _workloads(out):
        meta = obj["metadata"]
        cq = cq_of.get(f"{meta['namespace']}/{meta['name']}")
        if cq in rank and meta.get("uid"):
            meta["uid"] = f"{rank[cq]}-{meta['uid']}"
    return out


def _tied_heads_in_another_order(doc: dict[str, Any], checkpoint: int, theirs: dict[str, Any]) -> bool:
    """With the ties across ClusterQueues broken in another order, pykueue agrees with upstream, or differs
    only by another documented divergence."""
    tied = _tied_queues(doc)
    if len(tied) < 2 or len(tied) > 4:
        return False
    # Every order, pykueue's own too: the ranks replace the uids' order across ClusterQueues.
    for order in itertools.permutations(tied):
        other = _ranked(doc, {cq: i for i, cq in enumerate(order)})
        ours = _ours(other, checkpoint)
        if ours is None:
            continue
        if not compare.differences(ours, theirs) or any(k.matches(other, checkpoint, theirs) for k in _BASE):
            return True
    return False


# Upstream's cycle takes its heads from a Go map of ClusterQueues and sorts them without a last tie-break:
# heads of two ClusterQueues with the same borrowing, priority and creation time (whole seconds) go in either
# order, and the first may take quota (or, with blockAdmission, the only admission) the other needed.
# pykueue breaks the tie by uid.
TIE_ORDER = Known(
    "heads of different ClusterQueues that tie (borrowing, priority, creation time) go in no fixed order "
    "in upstream's cycle (pykueue: by uid)",
    "Differences from upstream found by differential testing",
    _tied_heads_in_another_order,
)

_BASE: list[Known] = [
    REQUEUE_ORDER,
    BLOCKED_CYCLE,
    RETRY_REQUEUE,
    RETRIED_AFTER_NOMINATION,
    RETRIED_AFTER_START,
]
KNOWN: list[Known] = [*_BASE, TIE_ORDER]

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
