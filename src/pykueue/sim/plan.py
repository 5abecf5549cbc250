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
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.table import Table

from pykueue.errors import InputError
from pykueue.sim import driver, simulation
from pykueue.sim.design import Design
from pykueue.sim.jobs import Job
from pykueue.sim.report_html import (
    Duration,
    headline_rows,
    human_duration,
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
    """A figure of one design: mean over seeds, noise (range), % delta and mark against the first.

    ``low`` and ``high`` are the smallest and largest value over the seeds; ``ci`` is the
    half-width of the 95% confidence interval of the mean (Student's t), only with 3 or
    more seeds: with two the interval is too wide to say anything.
    """

    value: float | int | None
    noise: float = 0.0
    delta: float | None = None  # percent of the first design's value
    mark: str = ""  # better, worse, noise or ""
    low: float | int | None = None
    high: float | int | None = None
    ci: float | None = None
    seeds: int = 1


# Two-sided 95% quantiles of Student's t by degrees of freedom; between tabulated degrees the
# lower one's (larger) quantile is taken, so an interval is never narrower than it should be.
T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}  # fmt: skip
MIN_SEEDS_FOR_CI = 3


def t95(degrees: int) -> float:
    """The two-sided 95% quantile of Student's t with ``degrees`` degrees of freedom."""
    if degrees < 1:
        raise ValueError("a confidence interval needs at least two values")
    known = [d for d in T95 if d <= degrees]
    return T95[max(known)] if degrees <= 120 else 1.960


def stats(numbers: list[float]) -> tuple[float, float, float, float | None]:
    """(mean, min, max, half-width of the 95% confidence interval or None under 3 values)."""
    n = len(numbers)
    mean = sum(numbers) / n
    ci = None
    if n >= MIN_SEEDS_FOR_CI:
        variance = sum((x - mean) ** 2 for x in numbers) / (n - 1)
        ci = t95(n - 1) * math.sqrt(variance / n)
    return mean, min(numbers), max(numbers), ci


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
    mean, low, high, ci = stats([float(v) for v in numbers])
    if all(isinstance(v, int) for v in numbers) and low == high:
        # an integer that no seed changes stays an integer (jobs, preemptions)
        return Cell(
            numbers[0],
            low=numbers[0],
            high=numbers[0],
            ci=0.0 if ci is not None else None,
            seeds=len(numbers),
        )
    return Cell(mean, high - low, low=low, high=high, ci=ci, seeds=len(numbers))


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


@dataclass(frozen=True, slots=True)
class Difference:
    """One figure of a chosen pair: both designs' cells and the per-seed differences.

    ``difference`` summarises second - first seed by seed (the same seed gives both designs
    the same uids and arrivals, so the pairs belong together): mean, min-max and, with 3 or
    more seeds, the 95% confidence interval. ``second.mark`` says whether the difference of
    the means goes beyond the seed noise (the rule of the side-by-side table).
    """

    figure: str
    first: Cell
    second: Cell
    difference: Cell

    @property
    def beyond_noise(self) -> bool:
        return self.second.mark in ("better", "worse")


def pairs(texts: list[str], names: list[str]) -> list[tuple[int, int]]:
    """``A:B`` pair options as design indexes; InputError naming the option when one is wrong."""
    result = []
    for text in texts:
        first, colon, second = text.partition(":")
        if not colon or not first or not second:
            raise InputError(f"--compare {text}: give two designs as A:B (designs: {', '.join(names)})")
        for name in (first, second):
            if name not in names:
                raise InputError(f"--compare {text}: no design {name} (designs: {', '.join(names)})")
        if first == second:
            raise InputError(f"--compare {text}: compare two different designs")
        result.append((names.index(first), names.index(second)))
    return result


def differences(
    outcomes: list[Outcome], first: int, second: int, noise_floor: float = NOISE_FLOOR
) -> list[Difference]:
    """Every headline figure of two designs, with the per-seed differences second - first."""
    runs_a = [dict(headline_rows(s)) for s in outcomes[first].summaries]
    runs_b = [dict(headline_rows(s)) for s in outcomes[second].summaries]
    figures = list(dict.fromkeys([*runs_a[0], *runs_b[0]]))
    result = []
    for figure in figures:
        a_values = [seed_rows.get(figure) for seed_rows in runs_a]
        b_values = [seed_rows.get(figure) for seed_rows in runs_b]
        a, b = _cell(a_values), _cell(b_values)
        paired = [
            float(y) - float(x)
            for x, y in zip(a_values, b_values, strict=True)
            if isinstance(x, int | float) and isinstance(y, int | float)
        ]
        diff = Cell(None)
        if paired and len(paired) == len(a_values):
            mean, low, high, ci = stats(paired)
            diff = Cell(mean, high - low, low=low, high=high, ci=ci, seeds=len(paired))
        result.append(Difference(figure, a, compare(figure, a, b, noise_floor), diff))
    return result


def beyond_text(item: Difference) -> str:
    if item.second.mark in ("better", "worse"):
        return MARKS[item.second.mark]
    if item.second.mark == "noise":
        return "≈ within noise"
    return ""


def compare_table(
    outcomes: list[Outcome], first: int, second: int, noise_floor: float = NOISE_FLOOR
) -> Table:
    """A chosen pair: each figure of both designs, the difference with its range, beyond noise or not."""
    a, b = outcomes[first].name, outcomes[second].name
    seeds = len(outcomes[first].summaries)
    title = f"{b} against {a}: difference = {b} - {a}"
    if seeds > 1:
        title += (
            f", per seed, over {seeds} seeds (mean"
            + (" ±95% confidence interval" if seeds >= MIN_SEEDS_FOR_CI else "")
            + "; below: min to max)"
        )
    title += f"\nbeyond noise: {MARKS['better']} or {MARKS['worse']}; {MARKS['noise']}: within the seed noise"
    result = Table(title=title, title_justify="left")
    items = differences(outcomes, first, second, noise_floor)
    longest = max((len(figure_label(item.figure)) for item in items), default=6)
    result.add_column("figure", max_width=min(longest, COMPARE_FIGURE_WIDTH), overflow="fold")
    means = [
        (
            value_lines(item.figure, dataclasses.replace(item.first, ci=None, seeds=1))[0],
            value_lines(item.figure, dataclasses.replace(item.second, ci=None, seeds=1))[0],
        )
        for item in items
    ]
    for name in (a, b):
        # names and values keep their width: the figure names wrap instead
        result.add_column(name, justify="right", no_wrap=True)
    result.add_column("difference", justify="right", no_wrap=True)
    result.add_column("verdict", no_wrap=True)
    for item, (mean_a, mean_b) in zip(items, means, strict=True):
        verdict = MARKS[item.second.mark] if item.second.mark else ""
        result.add_row(
            figure_label(item.figure),
            mean_a,
            mean_b,
            "\n".join(value_lines(item.figure, item.difference, signed=True)),
            _styled(verdict, item.second.mark),
            end_section=True,
        )
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


def as_number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


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


def _unit(figure: str, values: list[float]) -> tuple[float, str]:
    """(divisor, suffix) to show a figure's values in: a duration's human unit, else as they are."""
    if not figure.endswith("(s)"):
        return 1.0, ""
    biggest = max((abs(v) for v in values), default=0.0)
    if biggest < 90:
        return 1.0, " s"
    if biggest < 90 * 60:
        return 60.0, " min"
    if biggest < 48 * 3600:
        return 3600.0, " h"
    return 86400.0, " d"


def _number(value: float, divisor: float, suffix: str, signed: bool = False, digits: int = 3) -> str:
    """``value / divisor`` with ``digits`` significant digits (whole numbers in full)."""
    if suffix:
        value /= divisor
        text = f"{value:+.{digits}g}" if signed else f"{value:.{digits}g}"
    elif float(value).is_integer() or abs(value) >= 1000:
        text = f"{value:+,.0f}" if signed else f"{value:,.0f}"
    else:
        text = f"{value:+.{digits}g}" if signed else f"{value:.{digits}g}"
    return text


def value_lines(figure: str, cell: Cell, signed: bool = False) -> list[str]:
    """A cell as text: the mean (± the 95% confidence interval), then the range over the seeds.

    The mean, the interval and the range share one unit, so "12.5 ±0.7 min" and
    "11.1 to 13 min" can be quoted together.
    """
    v = cell.value
    if not isinstance(v, int | float) or isinstance(v, bool):
        return [_text(v)]
    shown = [float(v)] + [float(x) for x in (cell.low, cell.high) if isinstance(x, int | float)]
    divisor, suffix = _unit(figure, shown)
    if isinstance(v, int) and not suffix and not signed:
        mean = f"{v:,}"
    else:
        mean = _number(float(v), divisor, suffix, signed)
    varies = cell.seeds > 1 and cell.low is not None and cell.high is not None and cell.low != cell.high
    if cell.ci is not None and varies:
        mean += f" ±{_number(cell.ci, divisor, suffix, digits=2)}"  # an interval needs no more digits
    lines = [mean + suffix]
    if varies:
        assert cell.low is not None and cell.high is not None
        low = _number(float(cell.low), divisor, suffix, signed)
        high = _number(float(cell.high), divisor, suffix, signed)
        if low != high:  # a spread smaller than the shown digits is no range
            lines.append(f"{low} to {high}{suffix}")
    return lines


def _block_table(
    outcomes: list[Outcome],
    figures: list[tuple[str, list[Cell]]],
    columns: list[int],
    title: str,
    caption: str,
) -> Table:
    result = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    # Long figure names wrap at spaces inside a column of at most FIGURE_WIDTH (never cut);
    # the values never wrap.
    longest = max((len(figure_label(figure)) for figure, _ in figures), default=6)
    result.add_column("figure", width=min(longest, FIGURE_WIDTH), overflow="fold")
    for k in columns:
        name = outcomes[k].name + (" (base)" if k == 0 and len(outcomes) > 1 else "")
        result.add_column(name, justify="right", no_wrap=True)
    for figure, cells in figures:
        row = [figure_label(figure)]
        for k in columns:
            lines = value_lines(figure, cells[k])
            if k and cells[k].mark:
                lines.append(_styled(_delta(cells[k]), cells[k].mark))
            row.append("\n".join(lines))
        result.add_row(*row, end_section=True)
    return result


FIGURE_WIDTH = 24
COMPARE_FIGURE_WIDTH = 20


def _natural_width(renderable: Table) -> int:
    return Console(width=10_000).measure(renderable).maximum


def _blocks(designs: int, build: Callable[[list[int]], Table], width: int) -> list[list[int]]:
    """The designs after the base in groups, each as many as fit ``width`` beside the base."""
    others = list(range(1, designs))
    blocks: list[list[int]] = []
    while others:
        take = len(others)
        while take > 1 and _natural_width(build([0, *others[:take]])) > width:
            take -= 1
        blocks.append(others[:take])
        others = others[take:]
    return blocks or [[]]


def table(outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR, width: int = 80) -> Group:
    """The headline figures, designs as columns, in as many blocks as ``width`` columns need.

    Each block repeats the figure names and the first design (the base every Δ is against),
    so a block can be quoted on its own; values and names are never cut.
    """
    seeds = len(outcomes[0].summaries)
    title = "capacity plan: " + " vs ".join(o.name for o in outcomes)
    if seeds > 1:
        title += f" (means of {seeds} seeds"
        title += (
            ", ±95% confidence interval; below: min to max)"
            if seeds >= MIN_SEEDS_FOR_CI
            else "; below: min to max)"
        )
    figures = rows(outcomes, noise_floor)
    blocks = _blocks(len(outcomes), lambda columns: _block_table(outcomes, figures, columns, "", ""), width)
    tables = []
    for number, block in enumerate(blocks, start=1):
        block_title = title if number == 1 else "capacity plan, continued"
        if len(blocks) > 1:
            shown = ", ".join(outcomes[k].name for k in block)
            block_title += f"\npart {number} of {len(blocks)}: {outcomes[0].name} (base), {shown}"
        caption = legend_text(seeds) if number == len(blocks) else ""
        tables.append(_block_table(outcomes, figures, [0, *block], block_title, caption))
    return Group(*tables)


def _duration_cell(figure: str, value: Any) -> Any:
    if isinstance(value, int | float) and figure.endswith("(s)"):
        return Duration(value)
    return value


def figure_label(figure: str) -> str:
    """A figure's name without its unit when the value is shown in human units."""
    return figure.removesuffix(" (s)")


def legend_text(seeds: int) -> str:
    noise = (
        f"≈ within noise: inside the range of {seeds} seeds, or under {NOISE_FLOOR:g}%"
        if seeds > 1
        else f"≈ within noise: under {NOISE_FLOOR:g}% (one seed: use --seeds 3 to see the noise)"
    )
    return f"Δ against the first design: ✓ better, ✗ worse, {noise}"


def teams_table(
    outcomes: list[Outcome], noise_floor: float = NOISE_FLOOR, limit: int = 20, width: int = 80
) -> Group:
    """Per team: p90 completion delay and received resource-hours per design, and a verdict
    (in parts of as many designs as ``width`` holds, as the headline table)."""
    primary = outcomes[0].summary["totals"]["primaryResource"]
    unit = unit_of(primary)
    names = teams(outcomes)
    title = f"per team (ClusterQueue): p90 completion delay / {unit} received; below: the verdict"
    if len(names) > limit:
        title += f" (the first {limit} of {len(names)}; all in plan.html)"
    cells = {team: team_cells(outcomes, team, noise_floor) for team in names[:limit]}

    def build(columns: list[int], heading: str = "") -> Table:
        result = Table(title=heading or None, title_justify="left")
        result.add_column("team", no_wrap=True)
        for k in columns:
            base = " (base)" if k == 0 and len(outcomes) > 1 else ""
            result.add_column(outcomes[k].name + base, justify="right", no_wrap=True)
        for team, team_figures in cells.items():
            row = [team]
            for k in columns:
                delay = team_figures["p90 completion delay"][k]
                received = team_figures["received"][k]
                text = f"{human_duration(as_number(delay.value))} / {_text(received.value)}"
                if k:  # the verdict against the base below the figures
                    mark = team_verdict(team_figures, k)
                    text += "\n" + _styled(VERDICT_TEXT[mark], VERDICT_STYLE[mark])
                row.append(text)
            result.add_row(*row, end_section=True)
        return result

    blocks = _blocks(len(outcomes), build, width)
    tables = []
    for number, block in enumerate(blocks, start=1):
        heading = title if number == 1 else "per team, continued"
        if len(blocks) > 1:
            heading += f"\npart {number} of {len(blocks)}"
        tables.append(build([0, *block], heading))
    return Group(*tables)


VERDICT_TEXT = {"better": "✓ better", "worse": "✗ worse", "mixed": "± mixed", "same": "≈ same"}
VERDICT_STYLE = {"better": "better", "worse": "worse", "mixed": "", "same": "noise"}
