"""Capacity planning: one trace on several quota designs, side by side.

Every design gets a fresh engine state and the same jobs (checked against each
design first, so a job that one design cannot run is reported before anything
is simulated) with the same seeds. The comparison lists the headline figures of
each design next to the first design's, as values and % deltas, and marks what
is better or worse (lower is better for waits, delays, makespan, preemptions
and lost work; higher for finished jobs, utilisation and fairness).

Noise: a run depends on its seed (the uid tie-breaker) and, with ``jitter``, on
arrival times shifted by up to ``jitter`` per job. With several seeds each
figure is the mean over the seeds, and its *noise* is its range (max - min)
across them. A difference is "within noise" when it is at most the larger of
the two designs' noise, or below ``noise_floor`` percent of the first design's
value; only other differences are marked better or worse. Marks are words and
signs (``✓ better``, ``✗ worse``, ``≈ noise``) as well as colours, blue and
orange (Okabe-Ito, safe for colour-blind readers), never red against green.

Per team (ClusterQueue) the same rule compares p90 wait, p90 completion delay
and lost resource-hours, and gives a verdict: better, worse, mixed or same.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from rich.table import Table

from pykueue.sim import driver, simulation, svg
from pykueue.sim.design import Design
from pykueue.sim.jobs import SECOND, Job
from pykueue.sim.report_html import (
    Duration,
    dur,
    headline_rows,
    human_duration,
    page,
    queue_rows,
    table_html,
    unit_of,
)

HIGHER_IS_BETTER = ("finished", "utilisation", "fairness", "received")
NEUTRAL = ("jobs", "ideal makespan")
TOLERANCE = 1e-9
NOISE_FLOOR = 1.0  # percent of the first design's value: smaller differences are never marked
MARKS = {"better": "✓ better", "worse": "✗ worse", "noise": "≈ noise", "": ""}
STYLES = {"better": "bold blue", "worse": "bold dark_orange", "noise": "dim"}


@dataclass(slots=True)
class Outcome:
    """One design's runs, one per seed; ``run`` and ``summary`` are the first seed's (the reports)."""

    name: str
    run: driver.Run
    summary: dict[str, Any]
    summaries: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.summaries:
            self.summaries = [self.summary]


@dataclass(frozen=True, slots=True)
class Cell:
    """A figure of one design: mean over seeds, noise (range), % delta and mark against the first."""

    value: float | int | None
    noise: float = 0.0
    delta: float | None = None  # percent of the first design's value
    mark: str = ""  # better, worse, noise or ""


def jittered(jobs: list[Job], seed: int, jitter: int) -> list[Job]:
    """The jobs with each submission moved later by a deterministic draw in [0, jitter) microseconds."""
    if jitter <= 0:
        return jobs
    rng = random.Random(f"jitter/{seed}")
    return [dataclasses.replace(job, submit=job.submit + rng.randrange(jitter)) for job in jobs]


def run_all(
    designs: list[Design],
    jobs: list[Job],
    source: str,
    options: driver.Options,
    seeds: int = 1,
    jitter: int = 0,
) -> list[Outcome]:
    """Every design on seeds ``options.seed`` .. ``options.seed + seeds - 1``."""
    checked = [design.check(jobs) for design in designs]  # every design's problems before any run
    outcomes = []
    for design, design_jobs in zip(designs, checked, strict=True):
        runs = []
        for k in range(max(1, seeds)):
            seed = options.seed + k
            run = simulation.simulate(
                design, jittered(design_jobs, seed, jitter), dataclasses.replace(options, seed=seed)
            )
            runs.append((run, run.summary(source)))
        outcome = Outcome(design.name, runs[0][0], runs[0][1], [summary for _, summary in runs])
        outcomes.append(outcome)
    return outcomes


def higher_is_better(figure: str) -> bool:
    return figure.startswith(HIGHER_IS_BETTER) or any(word in figure for word in HIGHER_IS_BETTER)


def verdict(figure: str, base: Any, value: Any) -> str:
    """ "better", "worse" or "" for ``value`` against the first design's ``base`` (no noise)."""
    return compare(figure, Cell(base), Cell(value), noise_floor=0.0).mark.replace("noise", "")


def compare(figure: str, base: Cell, cell: Cell, noise_floor: float = NOISE_FLOOR) -> Cell:
    """``cell`` with its delta and mark against ``base``."""
    b, v = base.value, cell.value
    if not isinstance(b, int | float) or not isinstance(v, int | float):
        return cell
    delta = 100 * (v - b) / abs(b) if b else None
    if figure.startswith(NEUTRAL) or abs(v - b) <= TOLERANCE * max(1.0, abs(b)):
        return dataclasses.replace(cell, delta=delta, mark="")
    if abs(v - b) <= max(base.noise, cell.noise) or (delta is not None and abs(delta) < noise_floor):
        return dataclasses.replace(cell, delta=delta, mark="noise")
    better = (v > b) == higher_is_better(figure)
    return dataclasses.replace(cell, delta=delta, mark="better" if better else "worse")


def _cell(values: list[Any]) -> Cell:
    numbers = [v for v in values if isinstance(v, int | float)]
    if not numbers or len(numbers) != len(values):
        return Cell(values[0] if values else None)
    if all(isinstance(v, int) for v in numbers) and min(numbers) == max(numbers):
        return Cell(numbers[0])
    return Cell(sum(numbers) / len(numbers), max(numbers) - min(numbers))


def rows(outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR) -> list[tuple[str, list[Cell]]]:
    """(figure, a cell per design) for the headline figures, means over the seeds."""
    per_design = [[dict(headline_rows(s)) for s in o.summaries] for o in outcomes]
    # by name: a MultiKueue design has figures of its own (a design without workers shows "-")
    figures = list(dict.fromkeys(figure for runs in per_design for figure in runs[0]))
    result = []
    for figure in figures:
        cells = [_cell([seed_rows.get(figure) for seed_rows in runs]) for runs in per_design]
        base = cells[0]
        result.append((figure, [base] + [compare(figure, base, c, noise_floor) for c in cells[1:]]))
    return result


TEAM_FIGURES: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = (
    ("p90 wait", lambda q: q["wait"].get("p90")),
    ("p90 completion delay", lambda q: q["completionDelay"].get("p90")),
    ("lost", lambda q: sum(q["lostResourceHours"].values()) if q["lostResourceHours"] else 0.0),
    ("received", lambda q: q["usedPrimaryHours"]),
)
VERDICT_FIGURES = ("p90 wait", "p90 completion delay", "lost")


def teams(outcomes: list[Outcome]) -> list[str]:
    names: list[str] = []
    for outcome in outcomes:
        for name in outcome.summary["clusterQueues"]:
            if name not in names:
                names.append(name)
    return names


def team_cells(outcomes: list[Outcome], team: str, noise_floor: float = NOISE_FLOOR) -> dict[str, list[Cell]]:
    """Per team figure, a cell per design (means over seeds, marked against the first design)."""
    result = {}
    for figure, read in TEAM_FIGURES:
        cells = []
        for outcome in outcomes:
            values = [
                read(s["clusterQueues"][team]) if team in s["clusterQueues"] else None
                for s in outcome.summaries
            ]
            cells.append(_cell(values))
        result[figure] = [cells[0]] + [compare(figure, cells[0], c, noise_floor) for c in cells[1:]]
    return result


def team_verdict(cells: dict[str, list[Cell]], design: int) -> str:
    """better, worse, mixed or same, from the marks of the verdict figures of one design."""
    marks = {cells[figure][design].mark for figure in VERDICT_FIGURES}
    if "better" in marks and "worse" in marks:
        return "mixed"
    if "better" in marks:
        return "better"
    if "worse" in marks:
        return "worse"
    return "same"


# ------------------------------------------------------------------ terminal


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Duration):
        return human_duration(value)
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _delta(cell: Cell) -> str:
    if cell.delta is None or not cell.mark:
        return ""
    return f"{cell.delta:+.1f}% {MARKS[cell.mark].split()[0]}"


def _styled(text: str, mark: str) -> str:
    style = STYLES.get(mark)
    return f"[{style}]{text}[/{style}]" if style and text else text


def table(outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR) -> Table:
    seeds = len(outcomes[0].summaries)
    title = "capacity plan: " + " vs ".join(o.name for o in outcomes)
    if seeds > 1:
        title += f" (means of {seeds} seeds)"
    result = Table(title=title, title_justify="left", caption=_legend_text(seeds), caption_justify="left")
    result.add_column("figure")
    for k, outcome in enumerate(outcomes):
        result.add_column(outcome.name, justify="right")
        if k:
            result.add_column("Δ", justify="right", no_wrap=True)
    for figure, cells in rows(outcomes, noise_floor):
        row = [_label(figure), _text(_duration_cell(figure, cells[0].value))]
        for cell in cells[1:]:
            row.append(_text(_duration_cell(figure, cell.value)))
            row.append(_styled(_delta(cell), cell.mark))
        result.add_row(*row)
    return result


def _duration_cell(figure: str, value: Any) -> Any:
    if isinstance(value, int | float) and figure.endswith("(s)"):
        return Duration(value)
    return value


def _label(figure: str) -> str:
    """A figure's name without its unit when the value is shown in human units."""
    return figure.removesuffix(" (s)")


def _legend_text(seeds: int) -> str:
    noise = (
        f"≈ within noise: inside the range of {seeds} seeds, or under {NOISE_FLOOR:g}%"
        if seeds > 1
        else f"≈ within noise: under {NOISE_FLOOR:g}% (one seed: use --seeds 3 to see the noise)"
    )
    return f"Δ against the first design: ✓ better, ✗ worse, {noise}"


def teams_table(outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR, limit: int = 20) -> Table:
    """Per team: p90 completion delay and received resource-hours per design, and a verdict."""
    primary = outcomes[0].summary["totals"]["primaryResource"]
    unit = unit_of(primary)
    names = teams(outcomes)
    title = f"per team (ClusterQueue): p90 completion delay / {unit} received"
    if len(names) > limit:
        title += f" (the first {limit} of {len(names)}; all in plan.html)"
    result = Table(title=title, title_justify="left")
    result.add_column("team", no_wrap=True)
    for k, outcome in enumerate(outcomes):
        result.add_column(outcome.name, justify="right")
        if k:
            result.add_column("verdict", no_wrap=True)
    for team in names[:limit]:
        cells = team_cells(outcomes, team, noise_floor)
        row = [team]
        for k in range(len(outcomes)):
            delay = cells["p90 completion delay"][k]
            received = cells["received"][k]
            row.append(f"{human_duration(_num(delay.value))} / {_text(received.value)}")
            if k:
                mark = team_verdict(cells, k)
                row.append(_styled(VERDICT_TEXT[mark], VERDICT_STYLE[mark]))
        result.add_row(*row)
    return result


VERDICT_TEXT = {"better": "✓ better", "worse": "✗ worse", "mixed": "± mixed", "same": "≈ same"}
VERDICT_STYLE = {"better": "better", "worse": "worse", "mixed": "", "same": "noise"}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


# ---------------------------------------------------------------------- HTML


def render_html(outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR) -> str:
    names = [o.name for o in outcomes]
    seeds = len(outcomes[0].summaries)
    links = " · ".join(f"<a href='report-{escape(name)}.html'>{escape(name)}</a>" for name in names)
    sections = [
        f"<p class='note'>Same trace on every design, {seeds} seed(s) each"
        + (" (figures are means over the seeds)" if seeds > 1 else "")
        + f"; compared with the first design ({escape(names[0])}). "
        f"{escape(_legend_text(seeds))}. Blue is better, orange worse.</p>",
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
    header = ["figure"]
    for k, name in enumerate(names):
        header.append(name)
        if k:
            header.append("Δ")
    body_rows: list[list[Any]] = []
    classes: list[list[str]] = []
    for figure, cells in rows(outcomes, noise_floor):
        row: list[Any] = [_label(figure), _duration_cell(figure, cells[0].value)]
        css = ["", ""]
        for cell in cells[1:]:
            row += [_duration_cell(figure, cell.value), _delta_html(cell)]
            css += ["", cell.mark]
        body_rows.append(row)
        classes.append(css)
    sections.append("<h2>Side by side</h2>" + table_html(header, body_rows, classes))
    sections.append(_team_verdicts(outcomes, noise_floor))
    sections.append(_team_tables(outcomes))
    sections.extend(charts(outcomes))
    return page("pykueue capacity plan: " + " vs ".join(names), sections)


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
                row.append(dur(_num(cell.value)))
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
