"""Which pod is which in a TAS pod set: ranks read from the pods' index labels.

The engine writes a pod set's placement as counts per domain, in the order of the domains'
paths (block, rack, host). Expanded one slot per pod, that order gives each *rank* its
domain: rank 0 goes to the first slot, and so on, so the pods of one slice (consecutive
ranks) share the slice's domain, and a rack's pods sit next to each other.

A pod's rank comes from the labels its kind numbers it with, named by the pod set's
``topologyRequest`` (upstream's semantics):

    podIndexLabel                 an Indexed Job's completion index, an LWS worker index,
                                  a pod group's ``kueue.x-k8s.io/pod-group-pod-index``
    subGroupIndexLabel + Count    JobSet: the Job's index among its replicated job's replicas;
                                  rank = job index * pods per Job + completion index
    offset                        ranks start at this index: the pods of a smaller pod set of the
                                  same ``podSetGroupName`` come first (an LWS leader is worker
                                  index 0, its workers 1..n), plus the pods' own
                                  ``kueue.x-k8s.io/pod-index-offset`` annotation

When ranks cannot be used (a pod without the label, an index out of range, two pods with one
rank, a pod already let go to another domain than its rank's) the pod set falls back to the
greedy way: gated pods by name into the domains with room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pykueue.store.base import Manifest

INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"


@dataclass(frozen=True, slots=True)
class Ranking:
    """How one pod set's pods are numbered: ranks 0..count-1 start at pod index ``offset``."""

    index_label: str
    count: int
    offset: int = 0
    sub_group_label: str | None = None
    sub_groups: int | None = None

    def shifted(self, by: int) -> Ranking:
        return Ranking(self.index_label, self.count, self.offset + by, self.sub_group_label, self.sub_groups)


def _count(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def rankings_of(workload: Manifest) -> dict[str, Ranking]:
    """Each admitted pod set's ranking, for the pod sets whose request names an index label.

    Pod sets of one ``podSetGroupName`` (a leader and its workers) are numbered as one: the
    larger pod set's ranks start after the smaller one's pods.
    """
    spec_sets = {str(ps.get("name", "main")): ps for ps in (workload.get("spec") or {}).get("podSets") or []}
    admission = (workload.get("status") or {}).get("admission") or {}
    counts: dict[str, int] = {}
    groups: dict[str, list[str]] = {}
    for index, assigned in enumerate(admission.get("podSetAssignments") or []):
        name = str(assigned.get("name", "main"))
        fallback = _count((spec_sets.get(name) or {}).get("count"), 1)
        counts[name] = _count(assigned.get("count"), fallback)
        request = (spec_sets.get(name) or {}).get("topologyRequest") or {}
        group = request.get("podSetGroupName")
        groups.setdefault(str(group) if group else f"#{index}", []).append(name)
    offsets = dict.fromkeys(counts, 0)
    for members in groups.values():
        if len(members) > 1:
            # As upstream: the smaller of the group's (first two) pod sets is the leader, ranked first.
            first, second = members[0], members[1]
            small, large = (second, first) if counts[first] > counts[second] else (first, second)
            offsets[large] = counts[small]
    result: dict[str, Ranking] = {}
    for name, count in counts.items():
        request = (spec_sets.get(name) or {}).get("topologyRequest") or {}
        label = request.get("podIndexLabel")
        if not label:
            continue
        sub_label = request.get("subGroupIndexLabel")
        sub_groups = request.get("subGroupCount")
        result[name] = Ranking(
            str(label),
            count,
            offsets[name],
            str(sub_label) if sub_label else None,
            _count(sub_groups) if sub_groups is not None else None,
        )
    return result


def _index(pod: Manifest, label: str, bound: int) -> int | None:
    """The label's value as a number below ``bound``; None when missing or not one."""
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(label)
    if value is None or not str(value).isdigit():
        return None
    number = int(str(value))
    return number if number < bound else None


def offset_of(pods: Iterable[Manifest]) -> int | None:
    """The pods' ``pod-index-offset`` annotation (read from the first that has one); None when
    it is not a number, 0 when none has it."""
    for pod in pods:
        value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_OFFSET_ANNOTATION)
        if value is not None:
            return int(value) if str(value).lstrip("-").isdigit() else None
    return 0


def ranks(pods: Iterable[Manifest], ranking: Ranking) -> dict[int, Manifest] | None:
    """Each live pod by its rank; None when the ranks cannot be used (see the module docstring)."""
    size = ranking.count
    bound = size + ranking.offset
    per_job = size
    if ranking.sub_group_label is not None:
        if not ranking.sub_groups or ranking.sub_groups <= 0:
            return None
        per_job = size // ranking.sub_groups
    result: dict[int, Manifest] = {}
    for pod in pods:
        index = _index(pod, ranking.index_label, bound)
        if index is None:
            return None
        rank = index - ranking.offset
        if ranking.sub_group_label is not None and ranking.sub_groups:
            job = _index(pod, ranking.sub_group_label, ranking.sub_groups)
            if job is None or index >= per_job:
                return None
            rank = index + job * per_job - ranking.offset
        if not 0 <= rank < size or rank in result:
            return None
        result[rank] = pod
    return result


def slots(domains: Iterable[tuple[tuple[str, ...], int]]) -> list[tuple[str, ...]]:
    """The domain of each rank: the assignment's domains expanded, one entry per pod."""
    return [values for values, count in domains for _ in range(count)]


def level_values(pod: Manifest, levels: Iterable[str]) -> tuple[str, ...]:
    selector: Mapping[str, Any] = (pod.get("spec") or {}).get("nodeSelector") or {}
    return tuple(str(selector.get(level, "")) for level in levels)
