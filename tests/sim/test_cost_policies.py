"""Issue 45 in the simulator: cost-aware preemption loses less of a hand-computed trace, and a
design's jobs that run only on other queues' idle quota are named in its notes."""

from __future__ import annotations

import yaml

from pykueue.api import manifests
from pykueue.sim import policies, trace
from pykueue.sim.design import Design

from .helpers import cluster_queue, design, run, times

COST = "  annotations: {pykueue.io/preemption-cost: '{\"leastLostWork\": true}'}\n"

# `long` starts at 0 and checkpoints every hour, `short` starts at 3h; `urgent` (priority 100)
# needs one of the two CPUs at 4h. Upstream stops the most recently admitted, `short`: 1 h lost.
# Least lost work stops `long`, which has just saved its 4th hour: nothing lost.
TRACE = """\
name,queue,submit,runtime,priority,checkpoint,requests
long,pool/main,0,36000,0,3600,cpu=1
short,pool/main,10800,36000,0,,cpu=1
urgent,pool/main,14400,3600,100,,cpu=1
"""


def _pool(policy: bool) -> str:
    text = cluster_queue("pool", "2", within="LowerPriority", reclaim="Never")
    if policy:
        text = text.replace("metadata: {name: pool}\n", "metadata:\n  name: pool\n" + COST, 1)
    return text


def test_least_lost_work_stops_the_run_that_just_checkpointed() -> None:
    upstream = run(design(_pool(False)), TRACE)
    assert times(upstream, "short")["lost"] == 3600 and times(upstream, "long")["evictions"] == 0
    policy = run(design(_pool(True)), TRACE)
    assert times(policy, "long")["evictions"] == 1 and times(policy, "long")["lost"] == 0
    assert times(policy, "short")["evictions"] == 0


def test_jobs_beyond_their_nominal_are_named_in_the_notes() -> None:
    d = design(cluster_queue("a", "4", cohort="co"), cluster_queue("b", "4", cohort="co"))
    text = "name,queue,submit,runtime,requests\nbig,a/main,0,60,cpu=6\nsmall,a/main,0,60,cpu=2\n"
    d.check(trace.parse_csv(text, "trace.csv"))
    notes = [n for n in d.notes if n.startswith("ClusterQueue a:")]
    assert len(notes) == 1, d.notes
    assert "1 job(s) need more than its nominal quota" in notes[0]
    assert "the largest, a/big: by design: needs 6 cpu in flavor default, 2 more than" in notes[0]


# `train` (limit 1 h) starts at 0 and would run 2 h; `urgent` (priority 100) wants its CPU at
# 50 min. With `waitForEnd: 15m` it waits for the limit to end `train` at 1 h and stops
# nothing; that needs the simulator to hand the engine the declared limit.
LIMITED = """\
name,queue,submit,runtime,priority,maxExecutionTime,requests
train,pool/main,0,7200,0,3600,cpu=1
urgent,pool/main,3000,600,100,,cpu=1
"""
WAIT = '  annotations: {pykueue.io/preemption-cost: \'{"waitForEnd": "15m"}\'}\n'


def test_wait_for_end_is_honoured_in_the_simulator() -> None:
    text = cluster_queue("pool", "1", within="LowerPriority", reclaim="Never")
    upstream = run(design(text), LIMITED)
    assert times(upstream, "train")["evictions"] == 1
    waiting = run(
        design(text.replace("metadata: {name: pool}\n", "metadata:\n  name: pool\n" + WAIT, 1)), LIMITED
    )
    assert times(waiting, "train")["evictions"] == 0
    assert times(waiting, "urgent")["first"] == 3600


# `big` (4 CPUs) starts at 0; `urgent` (1 CPU, priority 100) arrives at 2 h: stopping `big`
# loses 8 h of work `urgent`'s size, more than `maxLostWork: 1h`, so it is put off for
# `putOffFor: 30m`, and nothing else happens meanwhile: the simulator wakes up for the end.
COSTLY = """\
name,queue,submit,runtime,priority,requests
big,pool/main,0,36000,0,cpu=4
urgent,pool/main,7200,600,100,cpu=1
"""
PUT_OFF = '  annotations: {pykueue.io/preemption-cost: \'{"maxLostWork": "1h", "putOffFor": "30m"}\'}\n'


def test_a_costly_preemption_is_put_off_in_the_simulator() -> None:
    text = cluster_queue("pool", "4", within="LowerPriority", reclaim="Never")
    assert times(run(design(text), COSTLY), "urgent")["first"] == 7200
    policy = run(
        design(text.replace("metadata: {name: pool}\n", "metadata:\n  name: pool\n" + PUT_OFF, 1)), COSTLY
    )
    assert times(policy, "urgent")["first"] == 7200 + 1800
    assert times(policy, "big")["evictions"] == 1


def test_the_summary_names_a_policy_taken_from_a_cohort() -> None:
    cohorts = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: org
  annotations: {pykueue.io/preemption-cost: '{"maxLostWork": "4h", "putOffFor": "6h"}'}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: lab}
spec: {parentName: org}
"""
    d = Design(
        "d",
        [
            *design(cluster_queue("a", "4", cohort="lab")).objects,
            *(manifests.parse_object(doc) for doc in yaml.safe_load_all(cohorts) if doc),
        ],
    )
    assert policies.in_force(d)["preemptionCost"] == {
        "a": "puts off a preemption losing over 4h of its size for up to 6h (Cohort org)"
    }
