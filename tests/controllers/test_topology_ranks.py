"""Issue 40 item 7: pods follow a TAS placement by their index, so a slice's pods share its domain.

And item 6's pod side: pod groups and LeaderWorkerSets get the topology gate, the index
labels and the rank offsets upstream gives them.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

from pykueue.engine.topology_assignments import Domain, TopologyAssignment
from pykueue.kube import webhooks
from pykueue.reconcilers import jobframework, topology_ranks, topology_ungater
from pykueue.reconcilers.integrations import leaderworkerset, pod
from pykueue.reconcilers.topology_ranks import Ranking

RACK = "rack"
INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
GATE = {"name": jobframework.TOPOLOGY_GATE}


def _pod(name: str, index: int | None, *, rack: str = "", job: int | None = None, **extra: str) -> Any:
    labels = {} if index is None else {INDEX: str(index)}
    if job is not None:
        labels[JOB_INDEX] = str(job)
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if rack:
        spec["nodeSelector"] = {RACK: rack}
    else:
        spec["schedulingGates"] = [GATE]
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": dict(extra)},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _racks(*counts: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((RACK,), tuple(Domain((r,), c) for r, c in counts))


def _plan(assignment: TopologyAssignment, pods: list[Any], ranking: Ranking | None) -> dict[str, str]:
    return {
        p["metadata"]["name"]: labels[RACK] for p, labels in topology_ungater.plan(assignment, pods, ranking)
    }


def test_slices_of_consecutive_indexes_go_to_one_rack_whatever_the_pod_names() -> None:
    # Two slices of 4 in racks r1 and r2. Names sort 'p-0', 'p-1', 'p-10'...: by name, greedy
    # would put index 10 with 0 and 1. By index, 0-3 share r1, 4-7 r2.
    names = ["p-0", "p-1", "p-10", "p-2", "p-3", "p-4", "p-5", "p-6"]
    indexes = [0, 1, 7, 2, 3, 4, 5, 6]
    pods = [_pod(n, i) for n, i in zip(names, indexes, strict=True)]
    assignment = _racks(("r1", 4), ("r2", 4))
    by_index = _plan(assignment, pods, Ranking(INDEX, 8))
    assert {i: by_index[n] for n, i in zip(names, indexes, strict=True)} == {
        **dict.fromkeys(range(4), "r1"),
        **dict.fromkeys(range(4, 8), "r2"),
    }
    greedy = _plan(assignment, pods, None)
    assert greedy["p-10"] == "r1"  # what happened before: index 7 in the first slice's rack


def test_a_jobset_ranks_by_job_index_then_completion_index() -> None:
    # Two Jobs of 2 pods: job 1's pods are ranks 2 and 3, in r2.
    pods = [_pod(f"j{j}-{i}", i, job=j) for j in (1, 0) for i in (1, 0)]
    ranking = Ranking(INDEX, 4, sub_group_label=JOB_INDEX, sub_groups=2)
    assert _plan(_racks(("r1", 2), ("r2", 2)), pods, ranking) == {
        "j0-0": "r1",
        "j0-1": "r1",
        "j1-0": "r2",
        "j1-1": "r2",
    }


def test_a_replacement_pod_takes_its_own_index_domain() -> None:
    # Index 2 (in r2) was replaced; the others run. It goes back to r2, not to the first room.
    pods = [_pod("a", 0, rack="r1"), _pod("b", 1, rack="r1"), _pod("c", 3, rack="r2"), _pod("new", 2)]
    assert _plan(_racks(("r1", 2), ("r2", 2)), pods, Ranking(INDEX, 4)) == {"new": "r2"}


def test_ranks_fall_back_to_greedy_when_they_cannot_be_used() -> None:
    assignment = _racks(("r1", 1), ("r2", 1))
    ranking = Ranking(INDEX, 2)
    # a pod without the label, an index out of range, two pods with one index
    for pods in (
        [_pod("a", None), _pod("b", 1)],
        [_pod("a", 0), _pod("b", 2)],
        [_pod("a", 1), _pod("b", 1)],
    ):
        assert _plan(assignment, pods, ranking) == {"a": "r1", "b": "r2"}
    # a pod let go to another domain than its rank's: the greedy way fills the rest
    assert _plan(assignment, [_pod("a", 0, rack="r2"), _pod("b", 1)], ranking) == {"b": "r1"}


def test_the_offset_annotation_and_a_group_shift_the_ranks() -> None:
    offset = {topology_ranks.INDEX_OFFSET_ANNOTATION: "1"}
    # Worker indexes 1 and 2 are ranks 0 and 1 (by name, greedy would swap them).
    pods = [_pod("a", 2, **offset), _pod("b", 1, **offset)]
    assert _plan(_racks(("r1", 1), ("r2", 1)), pods, Ranking(INDEX, 2)) == {"b": "r1", "a": "r2"}
    grouped = [_pod("a", 2), _pod("b", 1)]  # a group's offset (the leader's count) does the same
    assert _plan(_racks(("r1", 1), ("r2", 1)), grouped, Ranking(INDEX, 2, offset=1)) == {"b": "r1", "a": "r2"}


def _workload(pod_sets: list[dict[str, Any]], counts: dict[str, int]) -> dict[str, Any]:
    return {
        "spec": {"podSets": pod_sets},
        "status": {"admission": {"podSetAssignments": [{"name": n, "count": c} for n, c in counts.items()]}},
    }


def test_rankings_of_a_leader_and_workers_group_start_the_workers_after_the_leader() -> None:
    group = {"required": RACK, "podSetGroupName": "g"}
    workload = _workload(
        [
            {"name": "leader", "count": 1, "topologyRequest": group},
            {"name": "worker", "count": 3, "topologyRequest": {**group, "podIndexLabel": "w"}},
            {"name": "other", "count": 2, "topologyRequest": {"required": RACK, "podIndexLabel": "x"}},
            {"name": "plain", "count": 2},
        ],
        {"leader": 1, "worker": 3, "other": 2, "plain": 2},
    )
    assert topology_ranks.rankings_of(workload) == {
        "worker": Ranking("w", 3, offset=1),
        "other": Ranking("x", 2),
    }


def test_an_lws_replica_ranks_its_workers_by_worker_index() -> None:
    lws = {
        "metadata": {"name": "l", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 3,
                "workerTemplate": {
                    "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}}
                },
            }
        },
    }
    leaderworkerset.mutate(lws)
    worker_annotations = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    assert worker_annotations[topology_ranks.INDEX_OFFSET_ANNOTATION] == "1"
    leader, worker = leaderworkerset.pod_sets(lws)
    assert leader["topologyRequest"] == {"required": RACK}
    assert worker["topologyRequest"] == {
        "required": RACK,
        "podIndexLabel": leaderworkerset.WORKER_INDEX_LABEL,
    }
    # With a group name the group ranks the leader first: no offset annotation.
    grouped = {
        "metadata": {"name": "l", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-group-name": "g"}}},
            }
        },
    }
    leaderworkerset.mutate(grouped)
    annotations = grouped["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    assert topology_ranks.INDEX_OFFSET_ANNOTATION not in annotations


def test_a_held_pod_waits_behind_the_topology_gate_with_its_group_index_label() -> None:
    adapter = pod.PodAdapter()
    held: dict[str, Any] = {
        "metadata": {
            "name": "p",
            "labels": {"apps.kubernetes.io/pod-index": "3"},
            "annotations": {pod.GROUP_POD_INDEX_LABEL_ANNOTATION: "apps.kubernetes.io/pod-index"},
        },
        "spec": {"containers": [{"name": "main"}]},
    }
    adapter.suspend(held)
    adapter.hold_for_topology(held)
    assert held["spec"]["schedulingGates"] == [{"name": pod.SCHEDULING_GATE}, GATE]
    assert held["metadata"]["labels"][pod.GROUP_POD_INDEX_LABEL] == "3"
    assert "schedulingGates" not in pod.template_of(held)["spec"]  # Kueue's gates are not the pod set's
    assert adapter.topology_indexes(held, "main") == {"podIndexLabel": pod.GROUP_POD_INDEX_LABEL}


def test_an_admitted_pod_keeps_the_topology_gate_only_when_placed_by_topology() -> None:
    adapter = pod.PodAdapter()
    flavors = {"tas": {"spec": {"nodeLabels": {"pool": "a"}}}}
    placed = {"name": "main", "flavors": {"cpu": "tas"}, "topologyAssignment": {"levels": [RACK]}}

    def admitted(assignment: dict[str, Any]) -> Any:
        held: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "main"}]}}
        adapter.suspend(held)
        adapter.hold_for_topology(held)
        info = jobframework.PodSetInfo.from_assignment(assignment, flavors, 1, workload="wl")
        adapter.run_with_pod_sets(held, [info])
        return held

    tas = admitted(placed)
    assert tas["spec"]["schedulingGates"] == [GATE]
    assert tas["spec"]["nodeSelector"] == {"pool": "a"}
    assert tas["metadata"]["annotations"][jobframework.WORKLOAD_ANNOTATION] == "wl"
    assert tas["metadata"]["labels"][jobframework.POD_SET_LABEL] == "main"
    assert tas["metadata"]["labels"][jobframework.TAS_LABEL] == "true"
    plain = admitted({"name": "main", "flavors": {"cpu": "tas"}})
    assert "schedulingGates" not in plain["spec"]
    assert jobframework.WORKLOAD_ANNOTATION not in plain["metadata"]["annotations"]


def _review(pod_object: dict[str, Any]) -> dict[str, Any]:
    return {
        "uid": "u",
        "operation": "CREATE",
        "namespace": "ns",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "object": pod_object,
    }


def test_the_pod_webhook_adds_the_topology_gate_unless_tas_is_off() -> None:
    new = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/queue-name": "q", "idx": "2"},
            "annotations": {pod.GROUP_POD_INDEX_LABEL_ANNOTATION: "idx"},
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }

    def mutated(gates: dict[str, bool]) -> dict[str, Any]:
        config = webhooks.WebhookConfig(frameworks=("pod",), feature_gates=gates)
        response = asyncio.run(webhooks.mutate_job(_review(copy.deepcopy(new)), config, None))
        patch = json.loads(base64.b64decode(response["patch"]))
        result: dict[str, Any] = jsonpatch_apply(copy.deepcopy(new), patch)
        return result

    on = mutated({})
    assert on["spec"]["schedulingGates"] == [{"name": pod.SCHEDULING_GATE}, GATE]
    assert on["metadata"]["labels"][pod.GROUP_POD_INDEX_LABEL] == "2"
    off = mutated({"TopologyAwareScheduling": False})
    assert off["spec"]["schedulingGates"] == [{"name": pod.SCHEDULING_GATE}]


def jsonpatch_apply(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The few JSON-patch operations the webhook sends (add/replace/remove on object paths)."""
    for op in patch:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "remove":
            del target[last]
        elif isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), op["value"])
        else:
            target[last] = op["value"]
    return doc
