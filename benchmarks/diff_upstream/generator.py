"""Seeded random cases in the scenario format (shared/scenarios/FORMAT.md), without `expect`.

A case is a scenario document: `objects` (namespaces, flavors, cohorts, ClusterQueues, LocalQueues, the
first Workloads) and `steps`, each step one change (`apply` of new or deactivated Workloads or of a ClusterQueue
with new quotas, `finish`, `delete`) followed by `settle`. Every Workload sets `spec.priority` itself: the oracle runs without
webhooks, so nothing would derive it from a priority class. Names of Workloads to finish may not be
admitted when the step comes; the driver keeps only those that are (see upstream.resolve_finish).

Kinds added later, each behind a probability and drawn from a second stream (`extra`): AdmissionChecks
with ClusterQueues using them and `checks` steps, waitForPodsReady with `podsReady` steps, and
WorkloadPriorityClasses referenced by Workloads (`spec.priority` set to the class's value). A `checks` or
`podsReady` step may name Workloads that hold no quota (or not that check) then: the driver keeps the rest.
"""

from __future__ import annotations

import copy
import random
from typing import Any

API = "kueue.x-k8s.io/v1beta2"
NAMESPACES = ("team-a", "team-b")
TAINT = {"key": "spot", "value": "true", "effect": "NoSchedule"}


def generate(seed: int, index: int) -> dict[str, Any]:
    """The case `index` of the run seeded `seed` (the same pair gives the same case)."""
    rng = random.Random(f"{seed}/{index}")
    # The kinds added later (admission checks, waitForPodsReady, priority classes) draw from a stream of
    # their own: a case that has none of them is the one the same seed and index gave before they existed,
    # so divergences found and documented earlier can still be replayed by seed.
    extra = random.Random(f"{seed}/{index}/extra")
    return _Case(rng, f"diff {seed}/{index}", extra).doc()


class _Case:
    def __init__(self, rng: random.Random, name: str, extra: random.Random | None = None) -> None:
        self.rng = rng
        self.extra = extra or random.Random(f"{name}/extra")
        self.name = name
        self.workload_count = 0
        self.checks: list[str] = []
        self.classes: dict[str, int] = {}
        self.pods_ready = False

    def doc(self) -> dict[str, Any]:
        rng = self.rng
        fair = rng.random() < 0.3
        partial = rng.random() < 0.3
        config: dict[str, Any] = {}
        if fair:
            config["fairSharing"] = {
                "enable": True,
                "preemptionStrategies": rng.choice(
                    [["LessThanOrEqualToFinalShare", "LessThanInitialShare"], ["LessThanOrEqualToFinalShare"]]
                ),
            }
        if partial:
            config["featureGates"] = {"PartialAdmission": True}
        self.partial = partial
        self.fair = fair
        self._later_kinds(config)
        objects: list[dict[str, Any]] = []
        for ns in NAMESPACES:
            objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.flavors = self._flavors()
        objects += [f for f, _ in self.flavors]
        objects += [self._admission_check(name) for name in self.checks]
        objects += [
            {"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
            for name, value in self.classes.items()
        ]
        cohorts = self._cohorts()
        objects += cohorts
        cohort_names = [c["metadata"]["name"] for c in cohorts]
        self.cqs = [self._cluster_queue(i, cohort_names) for i in range(rng.randint(1, 4))]
        for cq in self.cqs:
            self._add_checks(cq)
        objects += self.cqs
        for cq in self.cqs:
            for ns in NAMESPACES:
                objects.append(
                    {
                        "apiVersion": API,
                        "kind": "LocalQueue",
                        "metadata": {"name": f"lq-{cq['metadata']['name']}", "namespace": ns},
                        "spec": {"clusterQueue": cq["metadata"]["name"]},
                    }
                )
        workloads = [self._workload() for _ in range(rng.randint(2, 7))]
        objects += workloads
        steps: list[dict[str, Any]] = [{"settle": {}}]
        names = [f"{w['metadata']['namespace']}/{w['metadata']['name']}" for w in workloads]
        live = list(workloads)
        for _ in range(rng.randint(1, 3)):
            new_kind = self._new_step(names)
            if new_kind is not None:
                steps += [new_kind, {"settle": {}}]
                continue
            kind = rng.choice(["apply", "apply", "apply", "finish", "delete", "deactivate", "quota"])
            if kind == "apply" or not live:
                # Later arrivals are often more important: they are what preemption is for.
                new = [self._workload(late=True) for _ in range(rng.randint(1, 3))]
                live += new
                names += [f"{w['metadata']['namespace']}/{w['metadata']['name']}" for w in new]
                steps.append({"apply": new})
            elif kind == "finish":
                steps.append({"finish": sorted(rng.sample(names, min(len(names), rng.randint(1, 2))))})
            elif kind == "delete":
                wl = rng.choice(live)
                live.remove(wl)
                steps.append(
                    {
                        "delete": [
                            {
                                "kind": "Workload",
                                "namespace": wl["metadata"]["namespace"],
                                "name": wl["metadata"]["name"],
                            }
                        ]
                    }
                )
            elif kind == "quota":
                steps.append({"apply": [self._requota(rng.choice(self.cqs))]})
            else:
                wl = rng.choice(live)
                live.remove(wl)
                off = {**wl, "spec": {**wl["spec"], "active": False}}
                steps.append({"apply": [off]})
            steps.append({"settle": {}})
        doc: dict[str, Any] = {"format": 1, "name": self.name, "objects": objects, "steps": steps}
        if config:
            doc["config"] = config
        return doc

    def _later_kinds(self, config: dict[str, Any]) -> None:
        """Which of the kinds added later this case has (every draw from `self.extra`)."""
        extra = self.extra
        if extra.random() < 0.3:
            self.checks = ["ac1"] if extra.random() < 0.6 else ["ac1", "ac2"]
        if extra.random() < 0.25:
            # blockAdmission with timeouts no case lives to see: what is compared is the blocking, not
            # when a timeout fires (that would depend on how long upstream took to settle).
            self.pods_ready = True
            config["waitForPodsReady"] = {
                "enable": True,
                "timeout": "1h",
                "recoveryTimeout": "1h",
                "blockAdmission": extra.random() < 0.6,
            }
        if extra.random() < 0.3:
            self.classes = {"low": extra.randint(0, 1), "mid": 2, "high": extra.choice([3, 5])}

    def _flavors(self) -> list[tuple[dict[str, Any], bool]]:
        out = []
        for i in range(self.rng.randint(1, 3)):
            spec: dict[str, Any] = {}
            tainted = False
            if self.rng.random() < 0.4:
                spec["nodeLabels"] = {"pool": f"p{i}"}
            if i > 0 and self.rng.random() < 0.3:
                spec["nodeTaints"] = [dict(TAINT)]
                tainted = True
            out.append(
                (
                    {
                        "apiVersion": API,
                        "kind": "ResourceFlavor",
                        "metadata": {"name": f"f{i}"},
                        "spec": spec,
                    },
                    tainted,
                )
            )
        return out

    def _cohorts(self) -> list[dict[str, Any]]:
        rng = self.rng
        shape = rng.choice(["none", "flat", "flat", "tree"])
        if shape == "none":
            self.cohort_choices: list[str | None] = [None]
            return []
        if shape == "flat":
            self.cohort_choices = ["root", "root", None]
            return []
        cohorts = [{"apiVersion": API, "kind": "Cohort", "metadata": {"name": "root"}, "spec": {}}]
        for child in ("left", "right"):
            cohorts.append(
                {
                    "apiVersion": API,
                    "kind": "Cohort",
                    "metadata": {"name": child},
                    "spec": {"parentName": "root"},
                }
            )
        self.cohort_choices = ["left", "right", "root"]
        return cohorts

    def _cluster_queue(self, i: int, cohort_names: list[str]) -> dict[str, Any]:
        rng = self.rng
        cohort = rng.choice(self.cohort_choices)
        flavors = [f for f, _ in self.flavors]
        chosen = rng.sample(flavors, rng.randint(1, len(flavors)))
        # One group (cpu, maybe memory and pods), or, with two flavors or more, cpu and memory in groups
        # of their own over disjoint flavors (a flavor may serve one group of a ClusterQueue only).
        if len(chosen) >= 2 and rng.random() < 0.3:
            cut = rng.randint(1, len(chosen) - 1)
            layout = [(["cpu"], chosen[:cut]), (["memory"], chosen[cut:])]
        else:
            resources = ["cpu"] if rng.random() < 0.6 else ["cpu", "memory"]
            if rng.random() < 0.15:
                resources.append("pods")
            layout = [(resources, chosen)]
        groups = []
        for resources, group_chosen in layout:
            group_flavors = []
            for flavor in group_chosen:
                quotas = []
                for res in resources:
                    quotas.append(self._quota(res, cohort))
                group_flavors.append({"name": flavor["metadata"]["name"], "resources": quotas})
            groups.append({"coveredResources": resources, "flavors": group_flavors})
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "queueingStrategy": rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
            "resourceGroups": groups,
            "preemption": {
                "withinClusterQueue": rng.choice(
                    ["Never", "LowerPriority", "LowerPriority", "LowerOrNewerEqualPriority"]
                ),
                "reclaimWithinCohort": rng.choice(["Never", "LowerPriority", "Any", "Any"]),
                "borrowWithinCohort": {"policy": rng.choice(["Never", "LowerPriority"])},
            },
        }
        if (
            spec["preemption"]["borrowWithinCohort"]["policy"] == "Never"
            or spec["preemption"]["reclaimWithinCohort"] == "Never"
        ):
            # The API forbids borrowWithinCohort with reclaimWithinCohort Never.
            spec["preemption"]["borrowWithinCohort"] = {"policy": "Never"}
        if cohort:
            spec["cohortName"] = cohort
        if cohort and self.fair and rng.random() < 0.5:
            spec["fairSharing"] = {"weight": rng.choice(["1", "2", "500m", "0"])}
        if rng.random() < 0.3:
            spec["flavorFungibility"] = {
                "whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"]),
                "whenCanPreempt": rng.choice(["MayStopSearch", "TryNextFlavor"]),
            }
        return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": f"cq{i}"}, "spec": spec}

    def _requota(self, cq: dict[str, Any]) -> dict[str, Any]:
        """The ClusterQueue with new nominal quotas (an admin's edit); lending limits stay within them."""
        changed = copy.deepcopy(cq)
        for group in changed["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for quota in flavor["resources"]:
                    unit = "Gi" if quota["name"] == "memory" else ""
                    nominal = self.rng.randint(0, 8)
                    quota["nominalQuota"] = f"{nominal}{unit}"
                    if "lendingLimit" in quota:
                        quota["lendingLimit"] = f"{min(nominal, self.rng.randint(0, 4))}{unit}"
        return changed

    def _quota(self, res: str, cohort: str | None) -> dict[str, Any]:
        rng = self.rng
        unit = {"cpu": "", "memory": "Gi", "pods": ""}[res]
        nominal = rng.randint(0, 8)
        quota: dict[str, Any] = {"name": res, "nominalQuota": f"{nominal}{unit}"}
        if cohort and rng.random() < 0.3:
            quota["borrowingLimit"] = f"{rng.randint(0, 4)}{unit}"
        if cohort and rng.random() < 0.3:
            quota["lendingLimit"] = f"{rng.randint(0, nominal)}{unit}"
        return quota

    def _workload(self, late: bool = False) -> dict[str, Any]:
        rng = self.rng
        self.workload_count += 1
        cq = rng.choice(self.cqs)["metadata"]["name"]
        pod_sets = []
        memory = rng.random() < 0.3
        for p in range(rng.choice([1, 1, 1, 2])):
            count = rng.randint(1, 4)
            requests: dict[str, str] = {"cpu": rng.choice(["500m", "1", "1", "2", "3"])}
            if memory:
                requests["memory"] = rng.choice(["1Gi", "2Gi"])
            pod_spec: dict[str, Any] = {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
            }
            if rng.random() < 0.3:
                pod_spec["tolerations"] = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
            labelled = [f for f, _ in self.flavors if f["spec"].get("nodeLabels")]
            if labelled and rng.random() < 0.2:
                pod_spec["nodeSelector"] = dict(rng.choice(labelled)["spec"]["nodeLabels"])
            pod_set: dict[str, Any] = {"name": f"ps{p}", "count": count, "template": {"spec": pod_spec}}
            if self.partial and count > 1 and rng.random() < 0.5:
                pod_set["minCount"] = rng.randint(1, count - 1)
            pod_sets.append(pod_set)
        spec: dict[str, Any] = {
            "queueName": f"lq-{cq}",
            "priority": rng.choice([0, 1, 2, 3, 3] if late else [0, 0, 1, 2]),
            "podSets": pod_sets,
        }
        if self.classes and self.extra.random() < 0.6:
            # No webhook runs on upstream's side to copy a class's value into spec.priority (the API
            # requires it with a class): the case sets it as the webhook would.
            name = self.extra.choice(sorted(self.classes))
            spec["priorityClassRef"] = {
                "group": API.split("/")[0],
                "kind": "WorkloadPriorityClass",
                "name": name,
            }
            spec["priority"] = self.classes[name]
        return {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {"name": f"w{self.workload_count}", "namespace": rng.choice(NAMESPACES)},
            "spec": spec,
        }

    # -- the kinds added later; every draw from `self.extra` -----------------------------------

    def _admission_check(self, name: str) -> dict[str, Any]:
        """An AdmissionCheck of a controller nobody runs: the steps play it (`checks`). pykueue takes a check
        without status as Active; on upstream the driver sets Active=True, as its controller would."""
        return {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": {"controllerName": "diff.example.com/check"},
        }

    def _add_checks(self, cq: dict[str, Any]) -> None:
        """Some ClusterQueues use the case's checks, each for every flavor or for some of them."""
        if not self.checks or self.extra.random() < 0.3:
            return
        flavors = sorted({f["name"] for group in cq["spec"]["resourceGroups"] for f in group["flavors"]})
        rules = []
        for name in self.checks:
            rule: dict[str, Any] = {"name": name}
            if len(flavors) > 1 and self.extra.random() < 0.3:
                rule["onFlavors"] = sorted(
                    self.extra.sample(flavors, self.extra.randint(1, len(flavors) - 1))
                )
            rules.append(rule)
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": rules}

    def _new_step(self, names: list[str]) -> dict[str, Any] | None:
        """A `checks` or `podsReady` step, or None for one of the older kinds. The Workloads named may not
        hold quota (or the check) when the step comes: the driver keeps those that do on upstream."""
        extra = self.extra
        kinds = []
        if self.checks:
            kinds += ["checks", "checks"]
        if self.pods_ready:
            kinds += ["podsReady"]
        if not kinds or extra.random() < 0.4:
            return None
        picked = sorted(extra.sample(names, min(len(names), extra.randint(1, 3))))
        if extra.choice(kinds) == "podsReady":
            return {"podsReady": picked}
        states = ["Ready", "Ready", "Ready", "Retry", "Rejected", "Pending"]
        return {
            "checks": {
                key: {
                    name: extra.choice(states)
                    for name in self.checks
                    if name == self.checks[0] or extra.random() < 0.7
                }
                for key in picked
            }
        }
