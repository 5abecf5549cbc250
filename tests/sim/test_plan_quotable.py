"""`plan` output that can be quoted (issue 44, item 6): ranges and confidence intervals across
seeds, the 80-column table with six designs, chosen pairs compared, the policies in force."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.sim import driver, plan, trace
from pykueue.sim.design import Design

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
HALF_HOUR = 1800 * 10**6


def _outcomes(seeds: int) -> list[plan.Outcome]:
    designs = [Design.load(EXAMPLES / "queues.yaml"), Design.load(EXAMPLES / "queues-capped.yaml")]
    jobs = trace.load(EXAMPLES / "trace.csv")
    return plan.run_all(designs, jobs, "t", driver.Options(seed=0), seeds=seeds, jitter=HALF_HOUR)


def test_each_figure_has_its_min_max_and_a_95_percent_interval_with_three_seeds():
    outcomes = _outcomes(3)
    waits = [s["totals"]["wait"]["mean"] for s in outcomes[0].summaries]
    (cells,) = [cells for figure, cells in plan.rows(outcomes) if figure == "mean wait (s)"]
    cell = cells[0]
    assert (cell.low, cell.high, cell.seeds) == (min(waits), max(waits), 3)
    mean = sum(waits) / 3
    sd = math.sqrt(sum((w - mean) ** 2 for w in waits) / 2)
    assert cell.ci is not None and math.isclose(cell.ci, 4.303 * sd / math.sqrt(3))
    # the text shows the mean ± the interval and the range, in one unit
    lines = plan.value_lines("mean wait (s)", cell)
    assert re.fullmatch(r"[\d.]+ ±[\d.]+ min", lines[0]), lines
    assert re.fullmatch(r"[\d.]+ to [\d.]+ min", lines[1]), lines


def test_two_seeds_give_a_range_but_no_interval():
    (cells,) = [cells for figure, cells in plan.rows(_outcomes(2)) if figure == "mean wait (s)"]
    assert cells[0].ci is None and cells[0].low is not None and cells[0].low < (cells[0].high or 0)


def test_student_t_quantiles():
    assert plan.t95(2) == 4.303
    assert plan.t95(35) == 2.042  # between tabulated degrees: the wider one below
    assert plan.t95(1000) == 1.96


def _plan(tmp_path: Path, *extra: str, trace_file: str = "trace.csv") -> str:
    result = CliRunner().invoke(
        app,
        ["plan", "--trace", str(EXAMPLES / trace_file), "--no-progress", "--out", str(tmp_path), *extra],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_80_column_table_keeps_every_name_and_value_with_six_designs(tmp_path: Path):
    queues = [str(EXAMPLES / name) for name in ("queues.yaml", "queues-capped.yaml") * 3]
    out = _plan(tmp_path, *[f"--queues={q}" for q in queues], "--seeds", "3", "--jitter", "30m")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in out  # nothing cut
    names = ["queues", "queues-capped", "queues-2", "queues-capped-2", "queues-3", "queues-capped-3"]
    headers = [line for line in lines if line.startswith("┃ figure")]
    assert len(headers) >= 2  # more than one block of columns
    for name in names:
        assert any(re.search(rf"┃ +{re.escape(name)}( \(base\))? ┃", h) for h in headers), name
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["designs"] == names
    for name in names:
        mean_wait = document["figures"]["mean wait (s)"][name]
        low = plan._number(mean_wait["min"], 60.0, " min")
        assert f"{low} to " in out, (name, low)  # every design's range is printed whole
    team_rows = [line for line in lines if line.startswith(("│ research", "│ product"))]
    assert len(team_rows) >= 4  # the per-team table comes in parts too
    for row in team_rows:
        cells = [cell.strip() for cell in row.strip("│").split("│")]
        assert all(cells), row  # no column squeezed empty
        assert len(re.findall(r"[\d.]+ \w+ / [\d.]+", row)) >= 2, row
    for label in ("utilisation of nominal", "nvidia.com/gpu (%)", "mean time to last", "fairness (min Jain"):
        assert sum(label in line for line in lines) == len(headers), label  # in every block


def test_a_chosen_pair_shows_differences_with_ranges_and_whether_they_beat_the_noise(tmp_path: Path):
    out = _plan(
        tmp_path,
        "--queues",
        str(EXAMPLES / "shared.yaml"),
        "--queues",
        str(EXAMPLES / "shared-fair.yaml"),
        "--compare",
        "shared:shared-fair",
        "--seeds",
        "3",
        "--jitter",
        "30m",
        trace_file="trace-shared.csv",
    )
    assert "shared-fair against shared: difference = shared-fair - shared" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    document = json.loads((tmp_path / "plan.json").read_text())
    (pair,) = document["comparisons"]
    assert (pair["first"], pair["second"]) == ("shared", "shared-fair")
    wait = pair["figures"]["mean wait (s)"]
    first = document["figures"]["mean wait (s)"]["shared"]["mean"]
    second = document["figures"]["mean wait (s)"]["shared-fair"]["mean"]
    assert math.isclose(wait["difference"]["mean"], second - first)
    assert wait["difference"]["min"] <= wait["difference"]["mean"] <= wait["difference"]["max"]
    assert wait["beyondNoise"] and wait["mark"] == "better"  # fair sharing halves the mean wait
    assert any(not f["beyondNoise"] for f in pair["figures"].values())
    compared = out[out.index("shared-fair against shared") :]  # the pair's table comes last
    row = next(line for line in compared.splitlines() if line.startswith("│ mean wait "))
    assert re.search(r"-[\d.]+ ±[\d.]+ min │ ✓ better", row), row
    html = (tmp_path / "plan.html").read_text()
    assert "shared-fair against shared" in html and "beyond noise?" in html


def test_a_pair_naming_an_unknown_design_is_refused(tmp_path: Path):
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "--trace",
            str(EXAMPLES / "trace.csv"),
            "--queues",
            str(EXAMPLES / "queues.yaml"),
            "--queues",
            str(EXAMPLES / "queues-capped.yaml"),
            "--compare",
            "queues:nope",
            "--no-progress",
        ],
    )
    assert result.exit_code == 2
    assert "--compare queues:nope: no design nope (designs: queues, queues-capped)" in result.output
