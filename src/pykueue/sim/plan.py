"""Capacity planning: one trace on several quota designs, side by side.

Every design gets a fresh engine state and the same jobs (checked against each
design first, so a job that one design cannot run is reported before anything
is simulated) with the same seed. The comparison lists the headline figures of
each run next to the first design's, marks what is better or worse (lower is
better for waits, makespan, preemptions and lost work; higher for finished
jobs, utilisation and fairness), and adds per-ClusterQueue waits and the
overlaid charts to the HTML.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from rich.table import Table

from pykueue.sim import driver, svg
from pykueue.sim.design import Design
from pykueue.sim.jobs import SECOND, Job
from pykueue.sim.report_html import headline_rows, page, table_html

HIGHER_IS_BETTER = ("finished", "utilisation", "fairness")
NEUTRAL = ("jobs", "ideal makespan")
TOLERANCE = 1e-9


@dataclass(slots=True)
class Outcome:
    name: str
    run: driver.Run
    summary: dict[str, Any]


def run_all(designs: list[Design], jobs: list[Job], source: str, options: driver.Options) -> list[Outcome]:
    checked = [design.check(jobs) for design in designs]  # every design's problems before any run
    outcomes = []
    for design, design_jobs in zip(designs, checked, strict=True):
        run = driver.simulate(design, design_jobs, options)
        outcomes.append(Outcome(design.name, run, run.summary(source)))
    return outcomes


def verdict(figure: str, base: Any, value: Any) -> str:
    """ "better", "worse" or "" for ``value`` against the first design's ``base``."""
    if not isinstance(base, int | float) or not isinstance(value, int | float):
        return ""
    if figure.startswith(NEUTRAL) or abs(value - base) <= TOLERANCE * max(1.0, abs(base)):
        return ""
    higher = figure.startswith(HIGHER_IS_BETTER) or "utilisation" in figure or "fairness" in figure
    return "better" if (value > base) == higher else "worse"


def rows(outcomes: list[Outcome]) -> list[tuple[str, list[Any], list[str]]]:
    """(figure, value per design, verdict per design) for the headline figures."""
    columns = [headline_rows(o.summary) for o in outcomes]
    result = []
    for k, (figure, base) in enumerate(columns[0]):
        values = [column[k][1] for column in columns]
        result.append((figure, values, [""] + [verdict(figure, base, v) for v in values[1:]]))
    return result


def table(outcomes: list[Outcome]) -> Table:
    result = Table(title="capacity plan: " + " vs ".join(o.name for o in outcomes), title_justify="left")
    result.add_column("figure")
    for outcome in outcomes:
        result.add_column(outcome.name, justify="right")
    for figure, values, verdicts in rows(outcomes):
        cells = []
        for value, mark in zip(values, verdicts, strict=True):
            text = "-" if value is None else (f"{value:,.2f}" if isinstance(value, float) else f"{value:,}")
            style = {"better": "green", "worse": "red"}.get(mark)
            cells.append(f"[{style}]{text}[/{style}]" if style else text)
        result.add_row(figure, *cells)
    return result


def render_html(outcomes: list[Outcome]) -> str:
    names = [o.name for o in outcomes]
    header = ["figure", *names]
    body_rows = []
    classes = []
    for figure, values, verdicts in rows(outcomes):
        body_rows.append([figure, *values])
        classes.append(["", *verdicts])
    sections = [
        "<p class='note'>Same trace and seed on every design; green is better and red worse than the "
        f"first design ({escape(names[0])}).</p>",
        "<h2>Side by side</h2>" + table_html(header, body_rows, classes),
    ]
    sections.append(_queue_waits(outcomes))
    waits = []
    for outcome in outcomes:
        rec = outcome.run.recorder
        values = sorted(
            (rec.first_admit[i] - job.submit) / SECOND
            for i, job in enumerate(rec.jobs)
            if rec.first_admit[i] >= 0
        )
        waits.append((outcome.name, values))
    sections.append(
        "<h2>Wait distribution</h2>" + svg.cdf_chart("wait to first admission, all jobs", waits, "wait (s)")
    )
    end = max(o.run.recorder.end for o in outcomes) or 1
    grid = [end * k // 239 for k in range(240)]
    x = [t / SECOND for t in grid]
    pending = []
    usage = []
    for outcome in outcomes:
        rec = outcome.run.recorder
        total_pending = [0] * len(grid)
        total_used = [0] * len(grid)
        nominal = 0
        for series in rec.queues.values():
            for k, v in enumerate(rec.on_grid(series, series.pending, grid)):
                total_pending[k] += v
            for k, v in enumerate(rec.on_grid(series, series.used, grid)):
                total_used[k] += v
            nominal += series.nominal.get(rec.primary, 0)
        pending.append((outcome.name, [float(v) for v in total_pending]))
        usage.append((outcome.name, [100 * v / nominal if nominal else None for v in total_used]))
    sections.append(
        "<h2>Pending workloads over time</h2>"
        + svg.line_chart("all queues", x, pending, "time (s)", "pending")
    )
    sections.append(
        "<h2>Usage over time</h2>"
        + svg.line_chart("in use, % of total nominal", x, usage, "time (s)", "%", y_max=100)
    )
    return page("pykueue capacity plan: " + " vs ".join(names), sections)


def _queue_waits(outcomes: list[Outcome]) -> str:
    queues: list[str] = []
    for outcome in outcomes:
        for name in outcome.summary["clusterQueues"]:
            if name not in queues:
                queues.append(name)
    header = (
        ["ClusterQueue"]
        + [f"{o.name}: mean wait (s)" for o in outcomes]
        + [f"{o.name}: use %" for o in outcomes]
    )
    body = []
    classes = []
    for name in queues[:200]:
        waits = [o.summary["clusterQueues"].get(name, {}).get("wait", {}).get("mean") for o in outcomes]
        uses = [
            o.summary["clusterQueues"].get(name, {}).get("averageUsagePercentOfNominal") for o in outcomes
        ]
        body.append([name, *waits, *uses])
        classes.append(
            [""]
            + [""]
            + [verdict("wait", waits[0], w) for w in waits[1:]]
            + [""]
            + [verdict("utilisation", uses[0], u) for u in uses[1:]]
        )
    return "<h2>Per ClusterQueue</h2>" + table_html(header, body, classes)
