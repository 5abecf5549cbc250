"""Small designs and traces for the simulator tests, written out as the user would."""

from __future__ import annotations

from pykueue.api import manifests
from pykueue.sim import driver, trace
from pykueue.sim.design import Design


def cluster_queue(
    name: str,
    cpu: str,
    cohort: str = "",
    borrowing_limit: str | None = None,
    within: str = "LowerPriority",
    reclaim: str = "Any",
) -> str:
    limit = f', borrowingLimit: "{borrowing_limit}"' if borrowing_limit is not None else ""
    cohort_line = f"  cohortName: {cohort}\n" if cohort else ""
    return f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
{cohort_line}  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: {within}, reclaimWithinCohort: {reclaim}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: "{cpu}"{limit}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: main, namespace: {name}}}
spec: {{clusterQueue: {name}}}
"""


FLAVOR = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
"""


def design(*queues: str, name: str = "design") -> Design:
    objects = manifests.load_text(FLAVOR + "---\n".join(queues), "queues.yaml", manifests.RELAXED)
    return Design(name, objects)


def run(design_: Design, csv_text: str, seed: int = 0) -> driver.Run:
    jobs = design_.check(trace.parse_csv(csv_text, "trace.csv"))
    return driver.simulate(design_, jobs, driver.Options(seed=seed))


def times(result: driver.Run, name: str) -> dict[str, float | int]:
    """A job's first/last admission, finish (seconds) and evictions, lost seconds."""
    rec = result.recorder
    index = next(i for i, job in enumerate(rec.jobs) if job.name == name)

    def seconds(value: int) -> float:
        return value / 1_000_000 if value >= 0 else -1

    return {
        "first": seconds(rec.first_admit[index]),
        "last": seconds(rec.last_admit[index]),
        "finish": seconds(rec.finish[index]),
        "evictions": rec.evictions[index],
        "lost": rec.lost_time[index] / 1_000_000,
    }
