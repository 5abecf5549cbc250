"""Upstream's scheduler-performance generator files, built exactly as upstream's generator does."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

from pykueue.engine.topology_requests import SliceLayer, TopologyRequest
from pykueue.sim import driver, generator
from pykueue.sim.design import Design
from pykueue.sim.trace import TraceError

BENCH = Path(__file__).resolve().parents[3] / "shared" / "bench" / "kueue-scheduler-perf"


def needs_bench(test):  # type: ignore[no-untyped-def]
    """The generator files live in ../shared, which CI lays next to the clone: missing is a failure."""

    @functools.wraps(test)
    def run(*args, **kwargs):  # type: ignore[no-untyped-def]
        assert BENCH.exists(), f"{BENCH} is missing: shared/ must sit next to the repository"
        return test(*args, **kwargs)

    return run


def kinds(generated: generator.Generated) -> Counter[str]:
    return Counter(obj.kind for obj in generated.objects)


@needs_bench
def test_baseline_shape():
    generated = generator.load(BENCH / "baseline" / "generator.yaml")
    assert kinds(generated) == {"ResourceFlavor": 1, "ClusterQueue": 30, "Namespace": 30, "LocalQueue": 30}
    assert generated.cohorts == [f"cohort-{i}" for i in range(5)]
    assert len(generated.jobs) == 15_000
    assert Counter(job.job_class for job in generated.jobs) == {
        "small": 10_500,
        "medium": 3_000,
        "large": 1_500,
    }
    assert set(generated.cq_classes.values()) == {"cq"}
    assert "cq-0-5-cohort-4" in generated.cq_classes
    cq = next(obj for obj in generated.objects if obj.kind == "ClusterQueue")
    assert cq.metadata.name == "cq-0-0-cohort-0"
    assert cq.spec.cohort_name == "cohort-0"
    resource = cq.spec.resource_groups[0].flavors[0].resources[0]
    assert (cq.spec.resource_groups[0].flavors[0].name, resource.name) == ("rf", "cpu")
    assert (str(resource.nominal_quota), str(resource.borrowing_limit)) == ("20", "100")
    assert (cq.spec.preemption.reclaim_within_cohort, cq.spec.preemption.within_cluster_queue) == (
        "Any",
        "LowerPriority",
    )


@needs_bench
def test_baseline_workloads_are_spaced_per_set_and_named_as_upstream():
    generated = generator.load(BENCH / "baseline" / "generator.yaml")
    mine = {job.name: job for job in generated.jobs if job.namespace == "cq-0-2-cohort-1"}
    assert len(mine) == 500
    assert mine["small-0-0-0"].submit == 100_000  # the first creation waits one interval
    assert mine["small-0-349-0"].submit == 35_000_000
    assert mine["medium-1-99-0"].submit == 50_000_000
    assert mine["large-2-0-0"].submit == 1_200_000
    large = mine["large-2-49-0"]
    assert (large.runtime, large.priority, large.queue, large.pod_sets[0].requests) == (
        1_000_000,
        200,
        "cq-0-2-cohort-1",
        {"cpu": 20_000},
    )
    assert [job.submit for job in generated.jobs] == sorted(job.submit for job in generated.jobs)


@needs_bench
def test_large_scale_shape():
    generated = generator.load(BENCH / "large-scale" / "generator.yaml")
    assert kinds(generated)["ClusterQueue"] == 1_000
    assert len(generated.cohorts) == 10
    assert len(generated.jobs) == 50_000
    assert Counter(job.job_class for job in generated.jobs) == {
        "small": 35_000,
        "medium": 11_000,
        "large": 4_000,
    }
    assert max(job.submit for job in generated.jobs) == 3_300_000


@needs_bench
def test_tas_shape_builds_the_topology_nodes_and_requests():
    generated = generator.load(BENCH / "tas" / "generator.yaml")
    assert kinds(generated)["ClusterQueue"] == 30
    assert kinds(generated)["Topology"] == 1
    assert kinds(generated)["Node"] == 1 * 10 * 64
    assert not generated.notes
    flavor = next(obj for obj in generated.objects if obj.kind == "ResourceFlavor")
    assert flavor.metadata.name == "tas-flavor"
    assert flavor.spec.topology_name == "default-topology"
    node = next(obj for obj in generated.objects if obj.kind == "Node")
    assert node.metadata.name == "node-b0-r0-n0"
    assert node.metadata.labels["kubernetes.io/hostname"] == "node-0"
    small = next(job for job in generated.jobs if job.job_class == "small-required-rack")
    assert (small.pod_sets[0].count, small.pod_sets[0].requests) == (2, {"cpu": 500})
    assert small.pod_sets[0].topology == TopologyRequest(required="cloud.provider.com/topology-rack")
    balanced = next(job for job in generated.jobs if job.job_class == "medium-balanced-rack")
    assert balanced.pod_sets[0].topology == TopologyRequest(
        slices=(SliceLayer("cloud.provider.com/topology-rack", 2),)
    )


TAS_SMALL = """\
topology:
  name: t
  levels:
  - {name: rack, count: 2, nodeLabel: example.com/rack}
  - {name: node, count: 2, nodeLabel: example.com/host, capacity: {cpu: "2"}}
resourceFlavor: {name: tas, nodeLabel: tas-node-group, topologyName: t}
cohorts:
- className: c
  count: 1
  queuesSets:
  - className: q
    count: 1
    nominalQuota: 100
    workloadsSets:
    - count: 1
      creationIntervalMs: 10
      workloads:
      - {className: a, runtimeMs: 5, priority: 1, request: 2, podCount: 2, tasConstraint: required, tasLevel: example.com/rack}
      - {className: b, runtimeMs: 5, priority: 1, request: 2, podCount: 3, tasConstraint: required, tasLevel: example.com/rack}
"""


def test_a_tas_generator_places_the_pods_in_the_simulation():
    # Quota (100 CPUs) takes both jobs; the topology does not: a rack has two 2-CPU nodes,
    # so 2 pods of 2 CPUs fit in one rack and 3 never do.
    generated = generator.parse(TAS_SMALL)
    design = Design("tas", generated.objects, generated.cq_classes)
    jobs = design.check(generated.jobs)
    totals = driver.simulate(design, jobs, driver.Options(seed=0)).summary("tas")["totals"]
    assert (totals["jobs"], totals["admitted"], totals["finished"]) == (2, 1, 1)


SMALL = """\
cohorts:
- className: c
  count: 2
  queuesSets:
  - className: q
    count: 1
    nominalQuota: 4
    workloadsSets:
    - count: 2
      creationIntervalMs: 10
      workloads:
      - {className: a, runtimeMs: 5, priority: 1, request: 1}
      - {className: b, runtimeMs: 5, priority: 2, request: 2}
"""


def test_templates_alternate_within_a_round():
    generated = generator.parse(SMALL)
    jobs = [(job.namespace, job.name, job.submit) for job in generated.jobs if job.namespace == "q-0-0-c-0"]
    assert jobs == [
        ("q-0-0-c-0", "a-0-0-0", 10_000),
        ("q-0-0-c-0", "b-0-0-1", 20_000),
        ("q-0-0-c-0", "a-0-1-0", 30_000),
        ("q-0-0-c-0", "b-0-1-1", 40_000),
    ]
    cq = next(obj for obj in generated.objects if obj.kind == "ClusterQueue")
    assert cq.spec.resource_groups[0].flavors[0].resources[0].borrowing_limit is None
    assert "reclaim_within_cohort" not in cq.spec.preemption.model_fields_set


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            SMALL.replace("count: 2\n  queuesSets", "count: two\n  queuesSets"),
            "generator.yaml:3 cohorts[0].count: expected an integer",
        ),
        (
            SMALL.replace("nominalQuota: 4", "nominalQuota: 4\n    nominal: 3"),
            "generator.yaml:8 cohorts[0].queuesSets[0].nominal: unknown field",
        ),
        (
            SMALL.replace("request: 1}", "request: lots}"),
            "cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].request",
        ),
        (
            SMALL.replace("nominalQuota: 4", "nominalQuota: 4\n    reclaimWithinCohort: Sometimes"),
            "reclaimWithinCohort: expected one of",
        ),
        ("cohorts: []\n", "at least one cohort"),
        ("cohorts: [\n", "not valid YAML"),
    ],
)
def test_bad_generator_files_name_line_and_field(text, expected):
    with pytest.raises(TraceError) as caught:
        generator.parse(text)
    assert expected in str(caught.value)
