"""Reservations for an aged head (docs/governance.md; issue 45, item 1): the annotation and the
configuration are read strictly, the policy in force comes from the queue, its cohorts or the
site, and the cycle holds back only what the reservation must. Scenarios 951-957 pin the
decisions; test_policies_matter shows 951, 953, 954 and 956 fail without the policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pykueue.api import configuration, governance
from pykueue.api.governance import Reservation
from pykueue.cli.scenario_command import check
from pykueue.engine import loading, reservations
from pykueue.engine.config import EngineConfig
from pykueue.engine.configuration import engine_config
from pykueue.engine.state import State
from pykueue.errors import ValidationError
from pykueue.scenario import loader, runner

SECOND = 1_000_000
HOUR = 3600 * SECOND
SCENARIOS = Path(__file__).parents[1] / "scenarios" / "governance"


def test_the_annotation_is_read_exactly() -> None:
    annotations = {governance.RESERVATION: '{"after": "1h30m"}'}
    assert governance.problems("ClusterQueue", annotations) == []
    assert governance.problems("Cohort", annotations) == []
    assert governance.reservation(annotations) == Reservation(after=90 * 60 * SECOND)
    assert governance.reservation({}) is None


@pytest.mark.parametrize(
    ("value", "path", "words"),
    [
        ('{"after": "soon"}', ".after", "is not a duration"),
        ('{"after": "2h", "before": "1h"}', ".before", "unknown field"),
        ("{}", ".after", "required field is missing"),
        ('"2h"', "", "must be a JSON object"),
    ],
)
def test_a_bad_annotation_names_the_field(value: str, path: str, words: str) -> None:
    found = governance.problems("Cohort", {governance.RESERVATION: value})
    assert found, value
    assert found[0].path == f"metadata.annotations[{governance.RESERVATION}]{path}"
    assert words in found[0].message


def test_only_cluster_queues_and_cohorts_take_it() -> None:
    found = governance.problems("LocalQueue", {governance.RESERVATION: '{"after": "2h"}'})
    assert found and "unknown pykueue annotation" in found[0].message


def _read(sections: dict[str, object]) -> EngineConfig:
    return engine_config(configuration.parse_sections(sections, "config.yaml"))


def test_the_site_default_is_read_and_a_bad_one_refused() -> None:
    assert _read({"pykueue": {"reservation": {"after": "6h"}}}).default_reservation == Reservation(6 * HOUR)
    assert _read({}).default_reservation is None
    with pytest.raises(ValidationError, match=r"pykueue.reservation.after"):
        _read({"pykueue": {"reservation": {"after": 3}}})
    with pytest.raises(ValidationError, match=r"pykueue.reservation.until"):
        _read({"pykueue": {"reservation": {"after": "1h", "until": "2h"}}})


def _doc(name: str) -> dict:
    return yaml.safe_load((SCENARIOS / name).read_text())


def _state(doc: dict, name: str) -> State:
    scenario = loader.parse(doc, name)
    state = State(config=scenario.config, now=scenario.now)
    for obj in scenario.objects:
        loading.apply(state, obj)
    return state


def test_the_policy_in_force_is_the_queues_then_the_cohorts_then_the_sites() -> None:
    doc = _doc("956-reservation-from-cohort.yaml")  # the Cohort says 2h
    state = _state(doc, "956")
    assert reservations.policy_of(state, "gang") == Reservation(2 * HOUR)
    assert reservations.policy_of(state, "team-b") == Reservation(2 * HOUR)
    for obj in doc["objects"]:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == "gang":
            obj["metadata"]["annotations"] = {governance.RESERVATION: '{"after": "30m"}'}
    doc["config"] = {"pykueue": {"reservation": {"after": "6h"}}}
    state = _state(doc, "956-own")
    assert reservations.policy_of(state, "gang") == Reservation(30 * 60 * SECOND)  # its own first
    assert reservations.policy_of(state, "team-b") == Reservation(2 * HOUR)  # then its cohort's
    site = _state(_doc("957-reservation-default-from-configuration.yaml"), "957")
    assert reservations.policy_of(site, "team-c") == Reservation(2 * HOUR)  # the site's
    off = _state(_doc("955-reservation-off-upstream-borrowers-take-it.yaml"), "955")
    assert reservations.policy_of(off, "gang") is None
    assert reservations.compute(off, []) == {}


@pytest.mark.parametrize(
    "name",
    [
        "951-reservation-borrowing-gang-starts.yaml",
        "956-reservation-from-cohort.yaml",
        "957-reservation-default-from-configuration.yaml",
    ],
)
def test_a_younger_head_reserves_nothing(name: str) -> None:
    """The gang waited 3 hours; with `after` longer than that, upstream's result comes back (955)."""
    doc = _doc(name)
    text = yaml.safe_dump(doc).replace("2h", "4h")
    scenario = loader.parse(yaml.safe_load(text), name)
    problems = check(scenario, runner.run(scenario))
    assert problems, f"{name} still holds the borrowers back before the gang is aged"
    off = loader.parse(_doc("955-reservation-off-upstream-borrowers-take-it.yaml"), "955")
    assert check(off, runner.run(off)) == []


def test_backfill_is_by_the_declared_limit() -> None:
    """952 admits `c-short` (20 minutes, ending before the reservation's start); the same
    workload with a 2-hour limit, or none, waits."""
    doc = _doc("952-reservation-backfill-ends-before.yaml")
    scenario = loader.parse(doc, "952")
    assert check(scenario, runner.run(scenario)) == []
    for limit in (7200, None):
        changed = _doc("952-reservation-backfill-ends-before.yaml")
        for obj in changed["objects"]:
            if obj["metadata"]["name"] == "c-short":
                if limit is None:
                    del obj["spec"]["maximumExecutionTimeSeconds"]
                else:
                    obj["spec"]["maximumExecutionTimeSeconds"] = limit
        variant = loader.parse(changed, "952-variant")
        assert check(variant, runner.run(variant)), limit


def test_once_its_workload_is_admitted_the_reservation_holds_nothing_more() -> None:
    """In the cycle that admits the reserving workload, a borrower ordered after it that fits
    beside it is admitted too (the reservation is not counted twice)."""
    doc = _doc("951-reservation-borrowing-gang-starts.yaml")
    objects = []
    for obj in doc["objects"]:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == "team-b":
            obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "10"
        if obj["metadata"].get("name") == "c-next":
            continue
        objects.append(obj)
    d_queue = yaml.safe_load(yaml.safe_dump(next(o for o in objects if o["metadata"]["name"] == "team-c")))
    d_queue["metadata"]["name"] = "team-d"
    objects.append(d_queue)
    objects.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": "team-d"},
            "spec": {"clusterQueue": "team-d"},
        }
    )
    wide = yaml.safe_load(yaml.safe_dump(next(o for o in objects if o["metadata"].get("name") == "big")))
    wide["metadata"].update(name="d-wide", namespace="team-d", creationTimestamp="2026-01-01T09:55:00Z")
    wide["spec"]["priority"] = -1  # ordered after the gang, both borrowing
    wide["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"
    objects.append(wide)
    doc["objects"] = objects
    # 16 CPUs, 6 in use: the gang (6, borrowing 4) and d-wide (4, borrowing 2) both fit.
    doc["steps"] = [{"cycle": 1}]
    doc.pop("expect", None)
    scenario = loader.parse(doc, "951-both")
    result = runner.run(scenario)
    assert {"gang/big", "team-d/d-wide"} <= set(result["admitted"]), result["admitted"]
