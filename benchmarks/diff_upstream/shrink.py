"""The smallest case that still diverges: greedy removal of steps, Workloads, pod sets, ClusterQueues and
flavors, each candidate played again on both sides (a removal is kept when the case still diverges)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

Doc = dict[str, Any]


def _wl_ref(obj: Any) -> str | None:
    if isinstance(obj, dict) and obj.get("kind") == "Workload":
        return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    return None


def without_workload(doc: Doc, key: str) -> Doc:
    out = copy.deepcopy(doc)
    out["objects"] = [o for o in out["objects"] if _wl_ref(o) != key]
    steps: list[dict[str, Any]] = []
    for step in out["steps"]:
        ((kind, value),) = step.items()
        if kind == "apply":
            value = [o for o in value if _wl_ref(o) != key]
        elif kind in ("finish", "podsReady"):
            value = [k for k in value if k != key]
        elif kind == "checks":
            value = {k: v for k, v in value.items() if k != key}
        elif kind == "delete":
            value = [r for r in value if f"{r['namespace']}/{r['name']}" != key]
        else:
            steps.append(step)
            continue
        if value:
            steps.append({kind: value})
    out["steps"] = _drop_idle_settles(steps)
    return out


def _drop_idle_settles(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two settles in a row are one (the first step always stays a settle)."""
    out: list[dict[str, Any]] = []
    for step in steps:
        if "settle" in step and out and "settle" in out[-1]:
            continue
        out.append(step)
    return out


def _workload_keys(doc: Doc) -> list[str]:
    keys = [_wl_ref(o) for o in doc["objects"]]
    for step in doc["steps"]:
        for o in step.get("apply", []):
            keys.append(_wl_ref(o))
    return list(dict.fromkeys(k for k in keys if k))


def candidates(doc: Doc) -> Iterator[Doc]:
    """Smaller variants of the case, biggest cuts first."""
    steps = doc["steps"]
    # The last change steps (with their settle), from the end.
    for i in range(len(steps) - 1, 0, -1):
        if "settle" not in steps[i]:
            yield {**copy.deepcopy(doc), "steps": _drop_idle_settles(steps[:i] + steps[i + 1 :])}
    for key in _workload_keys(doc):
        yield without_workload(doc, key)
    # ClusterQueues with their LocalQueues and Workloads.
    cqs = [o["metadata"]["name"] for o in doc["objects"] if o["kind"] == "ClusterQueue"]
    for cq in cqs:
        if len(cqs) < 2:
            break
        out = copy.deepcopy(doc)
        lqs = {
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in out["objects"]
            if o["kind"] == "LocalQueue" and o["spec"]["clusterQueue"] == cq
        }
        keys = [
            _wl_ref(o)
            for o in [*out["objects"], *(x for s in out["steps"] for x in s.get("apply", []))]
            if _wl_ref(o) and (o["metadata"]["namespace"], o["spec"]["queueName"]) in lqs
        ]
        for k in dict.fromkeys(keys):
            assert k is not None
            out = without_workload(out, k)
        out["objects"] = [
            o
            for o in out["objects"]
            if not (o["kind"] == "ClusterQueue" and o["metadata"]["name"] == cq)
            and not (o["kind"] == "LocalQueue" and o["spec"]["clusterQueue"] == cq)
        ]
        steps = []
        for step in out["steps"]:
            if "apply" in step:
                kept = [
                    o
                    for o in step["apply"]
                    if not (o["kind"] == "ClusterQueue" and o["metadata"]["name"] == cq)
                ]
                if not kept:
                    continue
                step = {"apply": kept}
            steps.append(step)
        out["steps"] = _drop_idle_settles(steps)
        yield out
    # Second pod sets, cohorts' features, flavor fungibility.
    for i, obj in enumerate(doc["objects"]):
        if obj["kind"] == "Workload" and len(obj["spec"]["podSets"]) > 1:
            for j in range(len(obj["spec"]["podSets"])):
                out = copy.deepcopy(doc)
                del out["objects"][i]["spec"]["podSets"][j]
                yield out
        if obj["kind"] == "ClusterQueue":
            for field in ("flavorFungibility", "admissionChecksStrategy"):
                if field in obj["spec"]:
                    out = copy.deepcopy(doc)
                    del out["objects"][i]["spec"][field]
                    yield out
            groups = obj["spec"]["resourceGroups"]
            if len(groups[0]["flavors"]) > 1:
                for j in range(len(groups[0]["flavors"])):
                    out = copy.deepcopy(doc)
                    del out["objects"][i]["spec"]["resourceGroups"][0]["flavors"][j]
                    yield out


def shrink(doc: Doc, diverges: Callable[[Doc], bool], budget: int = 60) -> tuple[Doc, int]:
    """Greedy: take the first smaller variant that still diverges, again, until none does or the budget
    (plays of a candidate) is spent. Returns the smallest case found and the plays used."""
    used = 0
    progress = True
    while progress and used < budget:
        progress = False
        for cand in candidates(doc):
            if used >= budget:
                break
            used += 1
            if diverges(cand):
                doc = cand
                progress = True
                break
    return doc, used
