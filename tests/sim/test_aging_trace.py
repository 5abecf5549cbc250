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


QUIET_TRACE = """name,submit,queue,runtime,requests
first,0,research/main,60,nvidia.com/gpu=4
big,1,research/main,600,nvidia.com/gpu=8
early-0,10,research/main,36000,nvidia.com/gpu=1
early-1,10,research/main,36000,nvidia.com/gpu=1
early-2,10,research/main,36000,nvidia.com/gpu=1
early-3,10,research/main,36000,nvidia.com/gpu=1
late-0,70,research/main,36000,nvidia.com/gpu=1
late-1,70,research/main,36000,nvidia.com/gpu=1
late-2,70,research/main,36000,nvidia.com/gpu=1
late-3,70,research/main,36000,nvidia.com/gpu=1
"""


def test_aging_wakes_a_quiet_queue() -> None:
    """Eight 10-hour jobs queued after ``big`` pass it and hold the GPUs; then nothing happens
    for 10 hours. Aging must not wait for an unrelated event: at ``big``'s first point (5
    minutes after its submission) it outranks all eight and preempts them."""
    path = EXAMPLE / "queues-aging.yaml"
    design = Design(path.stem, manifests.load_text(path.read_text(), str(path), manifests.RELAXED))
    jobs = design.check(trace.parse_csv(QUIET_TRACE, "quiet.csv"))
    big = times(driver.simulate(design, jobs, driver.Options(seed=0)), "big")
    assert big["first"] == 1 + 300, big
