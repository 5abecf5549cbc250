"""Issue 45 in the simulator: cost-aware preemption loses less of a hand-computed trace, and a
design's jobs that run only on other queues' idle quota are named in its notes."""

from __future__ import annotations

from pykueue.sim import trace

from .helpers import cluster_queue, design, run, times

COST = "  annotations: {pykueue.io/preemption-cost: '{\"leastLostWork\": true}'}\n"

# `long` (priority 0) starts at 0, `short` (priority 5) at 3h; `urgent` (priority 100) needs one
# of the two CPUs at 4h. Upstream stops `long` (the lower priority): 4 h lost. Least lost work
# stops `short`: 1 h lost.
TRACE = """\
name,queue,submit,runtime,priority,requests
long,pool/main,0,36000,0,cpu=1
short,pool/main,10800,36000,5,cpu=1
urgent,pool/main,14400,3600,100,cpu=1
"""


def _pool(policy: bool) -> str:
    text = cluster_queue("pool", "2", within="LowerPriority", reclaim="Never")
    if policy:
        text = text.replace("metadata: {name: pool}\n", "metadata:\n  name: pool\n" + COST, 1)
    return text


def test_least_lost_work_stops_the_short_run() -> None:
    upstream = run(design(_pool(False)), TRACE)
    assert times(upstream, "long")["lost"] == 4 * 3600 and times(upstream, "short")["evictions"] == 0
    policy = run(design(_pool(True)), TRACE)
    assert times(policy, "short")["lost"] == 3600 and times(policy, "long")["evictions"] == 0


def test_jobs_beyond_their_nominal_are_named_in_the_notes() -> None:
    d = design(cluster_queue("a", "4", cohort="co"), cluster_queue("b", "4", cohort="co"))
    text = "name,queue,submit,runtime,requests\nbig,a/main,0,60,cpu=6\nsmall,a/main,0,60,cpu=2\n"
    d.check(trace.parse_csv(text, "trace.csv"))
    notes = [n for n in d.notes if n.startswith("ClusterQueue a:")]
    assert len(notes) == 1, d.notes
    assert "1 job(s) need more than its nominal quota" in notes[0]
    assert "the largest, a/big: by design: needs 6 cpu in flavor default, 2 more than" in notes[0]
