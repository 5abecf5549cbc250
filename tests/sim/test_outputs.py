"""Determinism, the files `simulate --out` writes, and `plan` side by side."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.sim import driver, trace
from pykueue.sim.design import Design

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
TIES = "name,submit,queue,runtime,requests\n" + "".join(
    f"j{i},0,research/main,600,nvidia.com/gpu=8\n" for i in range(6)
)


def simulate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["simulate", *args, "--no-progress"])
    return result.exit_code, result.stdout


def test_same_seed_same_bytes():
    args = [
        "--queues",
        str(EXAMPLES / "queues.yaml"),
        "--trace",
        str(EXAMPLES / "trace.csv"),
        "--json",
        "--seed",
        "7",
    ]
    first = simulate(*args)
    second = simulate(*args)
    assert first[0] == 0
    assert first[1] == second[1]
    assert json.loads(first[1])["seed"] == 7


def test_the_seed_breaks_ties_between_equal_jobs():
    # Six equal jobs at the same instant: only the uid (drawn from the seed) orders them.
    design = Design.load(EXAMPLES / "queues.yaml")
    jobs = design.check(trace.parse_csv(TIES, "ties.csv"))

    def order(seed: int) -> list[str]:
        rec = driver.simulate(design, jobs, driver.Options(seed=seed)).recorder
        return [
            job.name for _, job in sorted(zip(rec.first_admit, rec.jobs, strict=True), key=lambda p: p[0])
        ]

    assert order(1) == order(1)
    assert len({tuple(order(seed)) for seed in range(6)}) > 1


def test_csv_and_jsonl_traces_give_the_same_run():
    design = Design.load(EXAMPLES / "queues.yaml")
    from_csv = driver.simulate(design, design.check(trace.load(EXAMPLES / "trace.csv"))).summary("x")
    from_jsonl = driver.simulate(design, design.check(trace.load(EXAMPLES / "trace.jsonl"))).summary("x")
    assert from_csv == from_jsonl
    assert from_csv["totals"]["finished"] == 8
    assert from_csv["totals"]["preemptions"] == 4


def test_out_folder_has_summary_report_and_jobs(tmp_path: Path):
    code, _ = simulate(
        "--queues",
        str(EXAMPLES / "queues.yaml"),
        "--trace",
        str(EXAMPLES / "trace.csv"),
        "--out",
        str(tmp_path),
    )
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["checker"]) == {"cmd", "clusterQueueClasses", "workloadClasses"}
    assert summary["totals"]["primaryResource"] == "nvidia.com/gpu"
    html = (tmp_path / "report.html").read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in html
    charts = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(charts) >= 7
    for chart in charts:
        xml.dom.minidom.parseString(chart)  # well-formed
    for title in (
        "Queue lengths over time",
        "Borrowed vs nominal",
        "Wait-time distributions",
        "lost GPU-hours",
        "Fairness over time",
    ):
        assert title in html
    jobs = (tmp_path / "jobs.csv").read_text().splitlines()
    assert len(jobs) == 9
    assert jobs[0].startswith("job,class,clusterQueue")
    rows = list(csv.DictReader(jobs))
    victims = [row for row in rows if int(row["evictions"])]
    assert sum(int(row["evictions"]) for row in victims) == summary["totals"]["preemptions"] == 4
    by_name = {row["job"]: row for row in rows}
    for row in victims:
        preemptors = row["preempted_by"].split(";")
        reasons = row["preemption_reasons"].split(";")
        assert len(preemptors) == len(reasons) == int(row["evictions"])
        for preemptor in preemptors:
            job, _, queue = preemptor.partition("@")
            assert by_name[job]["clusterQueue"] == queue  # a real job of the trace, in its queue
        assert set(reasons) <= {"InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing"}
        assert float(row["to_last_admission_s"]) > float(row["wait_s"])
        assert float(row["completion_delay_s"]) > 0
    assert "Who preempted whom" in html


def test_generator_runs_without_queues(tmp_path: Path):
    generator = tmp_path / "generator.yaml"
    generator.write_text(
        "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 2\n    nominalQuota: 2\n"
        "    borrowingLimit: 2\n    reclaimWithinCohort: Any\n    workloadsSets:\n    - count: 3\n      creationIntervalMs: 100\n"
        "      workloads:\n      - {className: w, runtimeMs: 1000, priority: 1, request: 2}\n"
    )
    code, out = simulate("--generator", str(generator), "--json", "--out", str(tmp_path / "o"))
    assert code == 0
    summary = json.loads(out)
    # 2 queues x 2 CPUs, six 2-CPU jobs of 1 s arriving at 0.1, 0.2, 0.3 s in each queue:
    # two run at a time: 0.1-1.1, 1.1-2.1, 2.1-3.1.
    assert summary["totals"]["makespanSeconds"] == 3.1
    assert (
        summary["checker"]["workloadClasses"]["w"]["averageTimeToAdmissionMs"]
        == (0 + 0 + 900 + 900 + 1800 + 1800) // 6
    )
    assert summary["checker"]["workloadClasses"]["w"]["count"] == 6
    assert set(summary["checker"]["clusterQueueClasses"]) == {"q"}
    assert (tmp_path / "o" / "design.yaml").exists()


def test_plan_shows_designs_side_by_side(tmp_path: Path):
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
        ],
    )
    assert result.exit_code == 0, result.output
    assert "queues-capped" in result.stdout
    html = (tmp_path / "plan.html").read_text()
    assert "Side by side" in html
    assert 'class="worse"' in html or 'class="better"' in html
    assert (tmp_path / "summary-queues.json").exists()
    assert (tmp_path / "summary-queues-capped.json").exists()
    assert (tmp_path / "report-queues-capped.html").exists()


def test_plan_needs_two_designs():
    result = CliRunner().invoke(
        app, ["plan", "--trace", str(EXAMPLES / "trace.csv"), "--queues", str(EXAMPLES / "queues.yaml")]
    )
    assert result.exit_code == 2
    assert "give --queues at least twice" in result.output


def test_progress_bar_can_be_forced_off_a_terminal():
    code, out = simulate_with_progress()
    assert code == 0
    assert "simulation of queues" in out


def simulate_with_progress() -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--queues",
            str(EXAMPLES / "queues.yaml"),
            "--trace",
            str(EXAMPLES / "trace.jsonl"),
            "--progress",
        ],
    )
    return result.exit_code, result.stdout


GENERATOR = (
    "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 2\n    nominalQuota: 2\n"
    "    borrowingLimit: 2\n    reclaimWithinCohort: Any\n    workloadsSets:\n    - count: 3\n      creationIntervalMs: 100\n"
    "      workloads:\n      - {className: w, runtimeMs: 1000, priority: 1, request: 2}\n"
)


def test_rangespec_rules_pass_and_fail(tmp_path: Path):
    generator = tmp_path / "generator.yaml"
    generator.write_text(GENERATOR)
    # wall 3100 ms; usage: 4 CPUs in use from 0.1 s to 3.1 s of 4 CPUs x 3.1 s = 96.77 %;
    # average time to admission (0 + 0 + 900 + 900 + 1800 + 1800) / 6 = 900 ms
    passing = tmp_path / "pass.yaml"
    passing.write_text(
        "cmd: {maxWallMs: 3100}\nclusterQueueClassesMinUsage: {q: 96.77}\nwlClassesMaxAvgTimeToAdmissionMs: {w: 900}\n"
    )
    result = CliRunner().invoke(app, ["simulate", "--generator", str(generator), "--rangespec", str(passing)])
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.stdout
    failing = tmp_path / "fail.yaml"
    failing.write_text(
        "cmd: {maxWallMs: 3000}\nclusterQueueClassesMinUsage: {q: 99}\nwlClassesMaxAvgTimeToAdmissionMs: {}\n"
    )
    result = CliRunner().invoke(app, ["simulate", "--generator", str(generator), "--rangespec", str(failing)])
    assert result.exit_code == 1
    assert result.stdout.count("FAIL") == 3  # the wall time, the usage, and class w unknown to the range file


def test_generator_errors_keep_their_brackets(tmp_path: Path):
    generator = tmp_path / "generator.yaml"
    generator.write_text(GENERATOR.replace("count: 2", "count: two"))
    result = CliRunner().invoke(app, ["simulate", "--generator", str(generator)])
    assert result.exit_code == 2
    assert "generator.yaml:6 cohorts[0].queuesSets[0].count: expected an integer" in result.output


def test_same_bytes_across_processes_with_different_hash_seeds():
    outputs = set()
    for hash_seed in ("1", "2"):
        completed = subprocess.run(
            [
                sys.executable,
                "-c",
                "from pykueue.cli.main import main; main()",
                "simulate",
                "--queues",
                str(EXAMPLES / "queues.yaml"),
                "--trace",
                str(EXAMPLES / "trace.jsonl"),
                "--json",
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        outputs.add(completed.stdout)
    assert len(outputs) == 1
