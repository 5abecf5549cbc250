"""Upstream's scheduler-performance checker, applied to a simulation's summary.

Upstream's checker (test/performance/scheduler/checker) reads a ``rangespec.yaml``
and fails when the wall time exceeds ``cmd.maxWallMs``, when a ClusterQueue
class's usage is below ``clusterQueueClassesMinUsage`` (percent), when a workload
class's average time to admission exceeds ``wlClassesMaxAvgTimeToAdmissionMs``,
or when the summary has a class the range file does not know. The same rules
run here on the summary's ``checker`` figures (virtual time).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pykueue.sim import yamlpaths
from pykueue.sim.trace import TraceError


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: str
    limit: str
    actual: str
    ok: bool


def load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceError([f"{path}: cannot read the range file: {exc.strerror or exc}"]) from exc
    try:
        doc, _ = yamlpaths.load(text, str(path))
    except ValueError as exc:
        raise TraceError([str(exc)]) from exc
    if not isinstance(doc, dict):
        raise TraceError(
            [
                f"{path}: expected a mapping with cmd, clusterQueueClassesMinUsage, wlClassesMaxAvgTimeToAdmissionMs"
            ]
        )
    known = {"cmd", "clusterQueueClassesMinUsage", "wlClassesMaxAvgTimeToAdmissionMs"}
    unknown = [key for key in doc if key not in known]
    if unknown:
        raise TraceError([f"{path} {unknown[0]}: unknown field; known: {', '.join(sorted(known))}"])
    return doc


def check(spec: dict[str, Any], summary: dict[str, Any]) -> list[Verdict]:
    """Every rule of ``spec`` against the summary, in upstream's order."""
    figures = summary["checker"]
    verdicts: list[Verdict] = []
    max_wall = (spec.get("cmd") or {}).get("maxWallMs")
    if max_wall is not None:
        wall = figures["cmd"]["wallMs"]
        verdicts.append(Verdict("wall time (ms)", f"<= {max_wall}", str(wall), wall <= max_wall))
    minimums = spec.get("clusterQueueClassesMinUsage") or {}
    for cls, values in figures["clusterQueueClasses"].items():
        rule = f"ClusterQueue class {cls}: usage (%)"
        usage = values["usagePercent"]
        if cls not in minimums:
            verdicts.append(Verdict(rule, "unexpected class", str(usage), False))
            continue
        ok = usage is not None and usage >= float(minimums[cls])
        verdicts.append(Verdict(rule, f">= {minimums[cls]}", str(usage), ok))
    maximums = spec.get("wlClassesMaxAvgTimeToAdmissionMs") or {}
    for cls, values in figures["workloadClasses"].items():
        rule = f"class {cls}: avg time to admission (ms)"
        actual = values["averageTimeToAdmissionMs"]
        if cls not in maximums:
            verdicts.append(Verdict(rule, "unexpected class", str(actual), False))
            continue
        verdicts.append(Verdict(rule, f"<= {maximums[cls]}", str(actual), actual <= int(maximums[cls])))
    return verdicts
