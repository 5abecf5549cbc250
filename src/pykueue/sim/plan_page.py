"""The plan's page (plan.html) and figures (plan.json): `plan`'s outcomes for a browser and for tools.

The terminal tables and the comparisons themselves are in `pykueue.sim.plan`; this module
renders them as HTML with charts, and as JSON.
"""

from __future__ import annotations

from html import escape
from typing import Any

from pykueue.sim import svg
from pykueue.sim.jobs import SECOND
from pykueue.sim.plan import (
    MARKS,
    NOISE_FLOOR,
    VERDICT_STYLE,
    VERDICT_TEXT,
    Cell,
    Outcome,
    as_number,
    beyond_text,
    differences,
    figure_label,
    legend_text,
    rows,
    team_cells,
    team_verdict,
    teams,
    value_lines,
)
from pykueue.sim.report_html import dur, page, queue_rows, table_html, unit_of

# ---------------------------------------------------------------------- HTML


def _cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "mean": cell.value,
        "min": cell.low,
        "max": cell.high,
        "ci95": cell.ci,
        "seeds": cell.seeds,
        **({"deltaPercent": cell.delta, "mark": cell.mark} if cell.mark or cell.delta is not None else {}),
    }


def figures_json(
    outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR, chosen: list[tuple[int, int]] | None = None
) -> dict[str, Any]:
    """plan.json: per figure and design the mean, min, max and 95% CI half-width; the chosen pairs."""
    document: dict[str, Any] = {
        "designs": [o.name for o in outcomes],
        "seeds": len(outcomes[0].summaries),
        "noiseFloorPercent": noise_floor,
        "figures": {
            figure: {o.name: _cell_json(cell) for o, cell in zip(outcomes, cells, strict=True)}
            for figure, cells in rows(outcomes, noise_floor)
        },
        "comparisons": [],
    }
    for first, second in chosen or []:
        document["comparisons"].append(
            {
                "first": outcomes[first].name,
                "second": outcomes[second].name,
                "figures": {
                    item.figure: {
                        "first": item.first.value,
                        "second": item.second.value,
                        "difference": _cell_json(item.difference),
                        "beyondNoise": item.beyond_noise,
                        "mark": item.second.mark,
                    }
                    for item in differences(outcomes, first, second, noise_floor)
                },
            }
        )
    return document


def render_html(
    outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR, chosen: list[tuple[int, int]] | None = None
) -> str:
    names = [o.name for o in outcomes]
    seeds = len(outcomes[0].summaries)
    links = " · ".join(f"<a href='report-{escape(name)}.html'>{escape(name)}</a>" for name in names)
    sections = [
        f"<p class='note'>Same trace on every design, {seeds} seed(s) each"
        + (" (figures are means over the seeds)" if seeds > 1 else "")
        + f"; compared with the first design ({escape(names[0])}). "
        f"{escape(legend_text(seeds))}. Blue is better, orange worse.</p>",
        f"<p>Per-design reports: {links}</p>",
    ]
    for outcome in outcomes:
        for note in outcome.summary["notes"]:
            sections.append(f"<p class='note'>{escape(outcome.name)}: {escape(note)}</p>")
    sections.append(
        "<p class='note'>"
        + "; ".join(
            f"{escape(o.name)}: fair sharing {escape(o.summary['model'].get('fairSharing', 'off'))}, "
            f"admission fair sharing {escape(o.summary['model'].get('admissionFairSharing', 'off'))}"
            for o in outcomes
        )
        + ".</p>"
    )
    sections.append(
        "<p class='note'>Policies in force (docs/governance.md): "
        + "; ".join(f"{escape(o.name)}: {escape(_policies_text(o.summary))}" for o in outcomes)
        + ".</p>"
    )
    header = ["figure"]
    for k, name in enumerate(names):
        header.append(name)
        if k:
            header.append("Δ")
    body_rows: list[list[Any]] = []
    classes: list[list[str]] = []
    for figure, cells in rows(outcomes, noise_floor):
        row: list[Any] = [figure_label(figure), _html_value(figure, cells[0])]
        css = ["", ""]
        for cell in cells[1:]:
            row += [_html_value(figure, cell), _delta_html(cell)]
            css += ["", cell.mark]
        body_rows.append(row)
        classes.append(css)
    sections.append("<h2>Side by side</h2>" + table_html(header, body_rows, classes))
    for first, second in chosen or []:
        sections.append(_comparison_html(outcomes, first, second, noise_floor))
    sections.append(_team_verdicts(outcomes, noise_floor))
    sections.append(_team_tables(outcomes))
    sections.extend(charts(outcomes))
    return page("pykueue capacity plan: " + " vs ".join(names), sections)


def _policies_text(summary: dict[str, Any]) -> str:
    section = summary.get("policies", {})
    aging = ", ".join(f"{cq} ({text})" for cq, text in section.get("aging", {}).items()) or "none"
    contracts = (
        ", ".join(f"{cq} ({text})" for cq, text in section.get("preemptionContract", {}).items()) or "none"
    )
    costs = ", ".join(f"{cq} ({text})" for cq, text in section.get("preemptionCost", {}).items()) or "none"
    held = ", ".join(f"{cq} ({text})" for cq, text in section.get("reservation", {}).items()) or "none"
    return f"aging {aging}; preemption contracts {contracts}; preemption cost {costs}; reservations {held}"


def _html_value(figure: str, cell: Cell) -> str:
    """The mean (± the 95% CI), then the min to max over the seeds in brackets."""
    lines = value_lines(figure, cell)
    return lines[0] + (f" ({lines[1]})" if len(lines) > 1 else "")


def _comparison_html(outcomes: list[Outcome], first: int, second: int, noise_floor: float) -> str:
    a, b = outcomes[first].name, outcomes[second].name
    header = ["figure", a, b, f"{b} - {a} (per seed: mean, min to max)", "beyond noise?"]
    body: list[list[Any]] = []
    classes: list[list[str]] = []
    for item in differences(outcomes, first, second, noise_floor):
        lines = value_lines(item.figure, item.difference, signed=True)
        body.append(
            [
                figure_label(item.figure),
                _html_value(item.figure, item.first),
                _html_value(item.figure, item.second),
                lines[0] + (f" ({lines[1]})" if len(lines) > 1 else ""),
                beyond_text(item),
            ]
        )
        classes.append(["", "", "", "", item.second.mark])
    note = (
        f"<p class='note'>{escape(b)} against {escape(a)}: each seed runs both designs on the same "
        "uids and arrivals, so the difference is taken seed by seed. Beyond noise when the means "
        "differ by more than either design's range over the seeds and by the noise floor.</p>"
    )
    return f"<h2>{escape(b)} against {escape(a)}</h2>{note}{table_html(header, body, classes)}"


def _delta_html(cell: Cell) -> str:
    if not cell.mark:
        return ""
    delta = f"{cell.delta:+.1f}% " if cell.delta is not None else ""
    return delta + MARKS[cell.mark]


def _team_verdicts(outcomes: list[Outcome], noise_floor: float) -> str:
    primary = outcomes[0].summary["totals"]["primaryResource"]
    unit = unit_of(primary)
    header = ["team"]
    for k, outcome in enumerate(outcomes):
        header += [
            f"{outcome.name}: p90 wait",
            f"{outcome.name}: p90 completion delay",
            f"{outcome.name}: lost {unit}",
            f"{outcome.name}: {unit} received",
        ]
        if k:
            header.append(f"{outcome.name}: verdict")
    body: list[list[Any]] = []
    classes: list[list[str]] = []
    for team in teams(outcomes)[:500]:
        cells = team_cells(outcomes, team, noise_floor)
        row: list[Any] = [team]
        css = [""]
        for k in range(len(outcomes)):
            for figure in ("p90 wait", "p90 completion delay"):
                cell = cells[figure][k]
                row.append(dur(as_number(cell.value)))
                css.append(cell.mark if k else "")
            for figure in ("lost", "received"):
                cell = cells[figure][k]
                row.append(cell.value)
                css.append(cell.mark if k else "")
            if k:
                mark = team_verdict(cells, k)
                row.append(VERDICT_TEXT[mark])
                css.append(VERDICT_STYLE[mark])
        body.append(row)
        classes.append(css)
    note = (
        "<p class='note'>Per team (ClusterQueue), against the first design: the verdict is better when "
        "p90 wait, p90 completion delay or lost work improve beyond noise and none gets worse; worse the "
        "other way round; mixed when both; same when nothing moves beyond noise. Received is the "
        f"{escape(unit)} its jobs held, in absolute units.</p>"
    )
    return f"<h2>Per team</h2>{note}{table_html(header, body, classes)}"


def _team_tables(outcomes: list[Outcome]) -> str:
    parts = ["<h2>Per ClusterQueue, each design</h2>"]
    for outcome in outcomes:
        primary = outcome.summary["totals"]["primaryResource"]
        header, body = queue_rows(outcome.summary, primary)
        parts.append(f"<h3>{escape(outcome.name)}</h3>{table_html(header, body[:500])}")
    return "".join(parts)


def charts(outcomes: list[Outcome]) -> list[str]:
    """The overlaid charts: wait CDFs, pending workloads and GPUs in use over time."""
    sections = []
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
        "<h2>Wait distribution</h2>"
        + svg.cdf_chart("wait to first admission, all jobs", waits, "wait", log_x=True)
    )
    end = max(o.run.recorder.end for o in outcomes) or 1
    grid = [end * k // 239 for k in range(240)]
    x = [t / SECOND for t in grid]
    pending = []
    usage = []
    primary = outcomes[0].run.recorder.primary
    for outcome in outcomes:
        rec = outcome.run.recorder
        total_pending = [0] * len(grid)
        total_used = [0] * len(grid)
        for series in rec.queues.values():
            for k, v in enumerate(rec.on_grid(series, series.pending, grid)):
                total_pending[k] += v
            for k, v in enumerate(rec.on_grid(series, series.used, grid)):
                total_used[k] += v
        pending.append((outcome.name, [float(v) for v in total_pending]))
        usage.append((outcome.name, [v / 1000 for v in total_used]))
    sections.append(
        "<h2>Pending workloads over time</h2>"
        + svg.line_chart("all queues", x, pending, "time", "pending", time_axis=True)
    )
    sections.append(
        f"<h2>Usage over time ({escape(primary)} in use)</h2>"
        + svg.line_chart(f"{primary} in use, all queues", x, usage, "time", primary, time_axis=True)
    )
    return sections
