"""One simulation, whatever the design: a single cluster, or a MultiKueue manager with its workers.

`pykueue.sim.driver` runs one cluster; `pykueue.sim.multicluster` builds on its options and
run to move jobs between a manager and its workers. This module only chooses between them, so
that neither has to know the other's entry point.
"""

from __future__ import annotations

from pykueue.sim import driver, multicluster
from pykueue.sim.design import Design
from pykueue.sim.jobs import Job


def simulate(design: Design, jobs: list[Job], options: driver.Options | None = None) -> driver.Run:
    """Run ``jobs`` (already checked against ``design``) to the end and return the run."""
    if design.federation is not None:
        return multicluster.simulate(design, jobs, options or driver.Options())
    return driver.simulate(design, jobs, options)
