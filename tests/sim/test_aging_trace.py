"""kueue#534's starvation in the simulator (examples/sim/starvation/): one 8-GPU job behind a
stream of 1-GPU jobs of the same priority. With the ClusterQueue's aging (1 point per 5
minutes) it is admitted within the bound docs/governance.md states: once every job queued
before its submission plus one aging interval (13 jobs of 30 minutes by minute 15, on 8 GPUs:
all admitted by minute 30, finished by minute 60) has finished, so at most 50 minutes after
its submission at minute 10 (observed: 31 m 15 s). Without aging it waits until the stream
has stopped (8 hours) and drained."""

from __future__ import annotations

from pathlib import Path

from pykueue.api import manifests
from pykueue.sim import driver, trace
from pykueue.sim.design import Design

from .helpers import times

EXAMPLE = Path(__file__).parents[2] / "examples" / "sim" / "starvation"
SUBMIT = 600  # seconds
BOUND = 50 * 60
STREAM_ENDS = 8 * 3600


def _run(queues: str) -> driver.Run:
    path = EXAMPLE / queues
    design = Design(path.stem, manifests.load_text(path.read_text(), str(path), manifests.RELAXED))
    jobs = design.check(trace.parse_csv((EXAMPLE / "trace.csv").read_text(), "trace.csv"))
    return driver.simulate(design, jobs, driver.Options(seed=0))


def test_with_aging_the_large_job_is_admitted_within_the_bound() -> None:
    big = times(_run("queues-aging.yaml"), "big")
    assert 0 <= big["first"] - SUBMIT <= BOUND, big
    assert big["evictions"] == 0


def test_without_aging_it_starves_while_the_stream_lasts() -> None:
    big = times(_run("queues.yaml"), "big")
    assert big["first"] > STREAM_ENDS, big
