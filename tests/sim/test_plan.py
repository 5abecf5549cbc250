"""`plan`: per-team rows and verdicts, % deltas with noise marks, several seeds, the per-design links."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.sim import plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"


def test_a_difference_inside_the_seed_range_or_under_the_floor_is_noise():
    base = plan.Cell(100.0, noise=10.0)
    assert plan.compare("p90 wait (s)", base, plan.Cell(108.0)).mark == "noise"  # inside the range
    assert plan.compare("p90 wait (s)", base, plan.Cell(115.0)).mark == "worse"
    assert plan.compare("p90 wait (s)", base, plan.Cell(85.0)).mark == "better"
    assert plan.compare("p90 wait (s)", base, plan.Cell(85.0)).delta == -15.0
    # higher is better for utilisation; 0.09 % is under the 1 % floor even with no noise
    quiet = plan.Cell(1000.0)
    assert plan.compare("utilisation of nominal cpu (%)", quiet, plan.Cell(1100.0)).mark == "better"
    assert plan.compare("makespan (s)", quiet, plan.Cell(1000.9)).mark == "noise"
    assert plan.compare("makespan (s)", quiet, plan.Cell(1000.9), noise_floor=0.0).mark == "worse"
    assert plan.compare("jobs", quiet, plan.Cell(7.0)).mark == ""


def test_team_verdicts():
    def cells(*marks: str) -> dict[str, list[plan.Cell]]:
        return {
            figure: [plan.Cell(1.0), plan.Cell(2.0, mark=mark)]
            for figure, mark in zip(
                ("p90 wait", "p90 completion delay", "lost", "received"), marks, strict=True
            )
        }

    assert plan.team_verdict(cells("better", "noise", "", "worse"), 1) == "better"  # received is not judged
    assert plan.team_verdict(cells("better", "worse", "", ""), 1) == "mixed"
    assert plan.team_verdict(cells("noise", "", "worse", ""), 1) == "worse"
    assert plan.team_verdict(cells("noise", "", "", ""), 1) == "same"


def test_plan_prints_per_team_rows_and_links_the_design_reports(tmp_path: Path):
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
            "--out",
            str(tmp_path),
            "--no-progress",
            "--seeds",
            "2",
        ],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "means of 2 seeds" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    lines = out.splitlines()
    team_rows = [k for k, line in enumerate(lines) if line.startswith(("│ research", "│ product"))]
    assert len(team_rows) == 2
    # each design's verdict sits below its figures, in the team's second line
    assert all(re.search(r"(better|worse|mixed|same)", lines[k + 1]) for k in team_rows)
    assert "✗" in out  # the capped design makes research wait longer: a sign, not only a colour
    html = (tmp_path / "plan.html").read_text()
    for name in ("queues", "queues-capped"):
        assert f"href='report-{name}.html'" in html
        assert (tmp_path / f"report-{name}.html").exists()
    assert "Per team" in html and "verdict" in html
    assert "✗ worse" in html
    assert "use %" not in html  # received vs entitled in absolute units instead


def test_jitter_and_seeds_give_noise_and_stay_deterministic():
    from pykueue.sim import driver, trace
    from pykueue.sim.design import Design

    design = Design.load(EXAMPLES / "queues.yaml")
    other = Design.load(EXAMPLES / "queues-capped.yaml")
    jobs = trace.load(EXAMPLES / "trace.csv")
    options = driver.Options(seed=0)
    jittered = plan.run_all([design, other], jobs, "t", options, seeds=3, jitter=1800 * 10**6)
    again = plan.run_all([design, other], jobs, "t", options, seeds=3, jitter=1800 * 10**6)
    assert [o.summaries for o in jittered] == [o.summaries for o in again]
    waits = {s["totals"]["wait"]["mean"] for s in jittered[0].summaries}
    assert len(waits) > 1  # arrivals moved: the mean wait differs between seeds
    (mean_wait,) = [cells for figure, cells in plan.rows(jittered) if figure == "mean wait (s)"]
    assert mean_wait[0].noise == max(waits) - min(waits)
