"""Policy revisions: what counts as a change, the readable diff, and the state at a revision."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pykueue.api import policy_history
from pykueue.api.policy_history import Revision, diff, normalize, operation, revision, state_at


def cq(nominal: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "research", **meta},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
                }
            ]
        },
        "status": {"pendingWorkloads": 3},
    }


def test_status_and_bookkeeping_metadata_are_not_policy() -> None:
    stored = cq("8", resourceVersion="17", generation=3, uid="u-1", managedFields=[{"manager": "kubectl"}])
    stored["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    assert normalize(stored) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "research"},
        "spec": stored["spec"],
    }
    rewritten = copy.deepcopy(stored)
    rewritten["metadata"]["resourceVersion"] = "18"
    rewritten["status"] = {"pendingWorkloads": 0}
    assert operation(stored, rewritten) is None
    assert revision(1, "t", "alice", stored, rewritten) is None


def test_operations_and_the_readable_diff() -> None:
    assert operation(None, cq("8")) == "create"
    assert operation(cq("8"), None) == "delete"
    assert operation(cq("8"), cq("4")) == "update"
    path = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert diff(cq("8"), cq("4")) == [f'  {path}: "8" -> "4"']
    labelled = cq("8", labels={"team": "ml"})
    assert diff(cq("8"), labelled) == ['+ metadata.labels.team: "ml"']
    assert diff(labelled, cq("8")) == ['- metadata.labels.team: "ml"']
    created = diff(None, cq("8"))
    assert '+ kind: "ClusterQueue"' in created and f'+ {path}: "8"' in created


def test_a_revision_names_its_object_and_round_trips_through_its_dict() -> None:
    lq = {"kind": "LocalQueue", "metadata": {"name": "a", "namespace": "team"}, "spec": {"clusterQueue": "x"}}
    found = revision(7, "2026-12-01T19:00:00Z", "alice (uid 1001)", None, lq)
    assert found is not None
    assert (found.kind, found.namespace, found.name, found.operation) == ("LocalQueue", "team", "a", "create")
    assert found.ref == "LocalQueue/team/a"
    shown = found.as_dict()
    assert shown["changes"] == len(shown["diff"]) == 4
    assert Revision.from_dict(shown) == found


def test_state_at_is_the_before_of_the_first_later_change() -> None:
    r1 = revision(1, "t", "a", None, cq("8"))
    r2 = revision(2, "t", "a", cq("8"), cq("4"))
    r3 = revision(3, "t", "a", cq("4"), cq("2"))
    assert r1 and r2 and r3
    key = ("ClusterQueue", "", "research")
    assert state_at([r3, r1, r2], 1) == {key: normalize(cq("8"))}
    assert state_at([r1, r2, r3], 2) == {key: normalize(cq("4"))}
    assert state_at([r1, r2, r3], 0) == {key: None}
    assert state_at([r1, r2, r3], 3) == {}


# ---------------------------------------------------------------- properties

values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
    max_leaves=8,
)
specs = st.dictionaries(st.sampled_from(["a", "b", "c"]), values, max_size=3)


@settings(max_examples=300, deadline=None)
@given(specs, specs)
@example({"b": {"y": False}}, {"b": {"y": 0}})  # equal in Python, not in a manifest
def test_the_diff_is_empty_exactly_when_nothing_a_user_owns_changed(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    old = {"kind": "Cohort", "metadata": {"name": "c"}, "spec": a}
    new = {"kind": "Cohort", "metadata": {"name": "c", "resourceVersion": "9"}, "spec": b, "status": {"x": 1}}
    assert (diff(old, new) == []) == (operation(old, new) is None)
    same = json.dumps(normalize(old)["spec"], sort_keys=True) == json.dumps(
        normalize(new)["spec"], sort_keys=True
    )  # type: ignore[index]
    assert (operation(old, new) is None) == same


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["p", "q"]), st.none() | st.integers(0, 3)), max_size=12), st.data()
)
def test_state_at_matches_replaying_the_history_up_to_the_revision(
    ops: list[tuple[str, int | None]], data: st.DataObject
) -> None:
    """Replay random creates, updates and deletes; state_at(REV) is what replaying up to REV gives."""
    current: dict[str, dict[str, Any] | None] = {"p": None, "q": None}
    revisions: list[Revision] = []
    states: list[dict[str, dict[str, Any] | None]] = [dict(current)]
    for name, value in ops:
        after = (
            None if value is None else {"kind": "Cohort", "metadata": {"name": name}, "spec": {"v": value}}
        )
        found = revision(len(revisions) + 1, "t", "w", current[name], after)
        if found is None:
            continue
        revisions.append(found)
        current[name] = normalize(after)
        states.append(dict(current))
    rev = data.draw(st.integers(0, len(revisions)))
    wanted = state_at(revisions, rev)
    changed_later = {r.name for r in revisions if r.rev > rev}
    assert {key[2] for key in wanted} == changed_later
    for (_, _, name), obj in wanted.items():
        assert obj == states[rev][name]
    assert all(kind in policy_history.POLICY_KINDS for kind, _, _ in wanted)
