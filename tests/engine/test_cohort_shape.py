"""The cohort trees' shape: nodes and cycles from the objects; each tree's ClusterQueues, kept as queues come and go."""

from __future__ import annotations

from pykueue.engine import activeness, cohort_shape, specs


def _cq(name: str, cohort: str = "") -> specs.ClusterQueue:
    return specs.ClusterQueue(name=name, cohort=cohort)


def test_build_links_nodes_and_cuts_a_cycle_loose() -> None:
    cohorts = {
        "root": specs.Cohort(name="root"),
        "team": specs.Cohort(name="team", parent="root"),
        "a": specs.Cohort(name="a", parent="b"),
        "b": specs.Cohort(name="b", parent="a"),
    }
    queues = {"q1": _cq("q1", "team"), "q2": _cq("q2", "implicit"), "q3": _cq("q3", "a")}
    nodes, cohort_nodes, in_cycle = cohort_shape.build(cohorts, queues)
    assert in_cycle == {"a", "b"}
    assert nodes["q1"].parent is cohort_nodes["team"] and cohort_nodes["team"].parent is cohort_nodes["root"]
    assert nodes["q2"].parent is cohort_nodes["implicit"]  # a cohort no object defines still gets a node
    assert cohort_nodes["a"].parent is None and cohort_nodes["b"].parent is None
    assert cohort_shape.root_name(cohorts, "team") == "root"
    assert activeness.inactive(queues["q3"], {}, {}, in_cycle) == (
        "CohortCycle",
        "Can't admit new workloads: is in cohort a, whose parents form a cycle.",
    )
    assert activeness.inactive(queues["q1"], {}, {}, in_cycle) is None


def test_members_kept_as_queues_join_equal_members_worked_out_again() -> None:
    cohorts = {"root": specs.Cohort(name="root"), "team": specs.Cohort(name="team", parent="root")}
    queues = {"q1": _cq("q1", "team"), "q2": _cq("q2", "other")}
    members = cohort_shape.Members()
    assert list(members.of_tree("team", cohorts, queues)) == ["q1"]
    # A new queue joins the worked-out members; one that moves trees makes them be worked out again.
    queues["q3"] = _cq("q3", "root")
    members.note(queues["q3"], None, cohorts)
    assert list(members.of_tree("root", cohorts, queues)) == ["q1", "q3"]
    old, queues["q1"] = queues["q1"], _cq("q1", "other")
    members.note(queues["q1"], old, cohorts)
    fresh = cohort_shape.Members()
    for cohort in ("root", "other"):
        assert list(members.of_tree(cohort, cohorts, queues)) == list(fresh.of_tree(cohort, cohorts, queues))
    assert list(members.of_tree("other", cohorts, queues)) == ["q1", "q2"]
