"""Bad traces and designs are reported with file, line and field, never as a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.sim import trace
from pykueue.sim.trace import TraceError

from .helpers import FLAVOR, cluster_queue, design

HEADER = "name,submit,queue,runtime,requests\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEADER + "a,0,team/main,-5,cpu=1\n", "trace.csv:2 runtime: must not be negative (got -5)"),
        (HEADER + "a,-1,team/main,5,cpu=1\n", "trace.csv:2 submit: must not be negative"),
        (HEADER + "a,0,team/main,soon,cpu=1\n", "trace.csv:2 runtime: expected seconds or a duration"),
        (HEADER + "a,0,team-main,5,cpu=1\n", "trace.csv:2 queue: expected namespace/localqueue"),
        (HEADER + "a,0,team/main,5,cpu=lots\n", "trace.csv:2 requests.cpu:"),
        (HEADER + "a,0,team/main,5,cpu\n", "trace.csv:2 requests: expected resource=quantity pairs"),
        (HEADER + "a,0,team/main,5\n", "trace.csv:2: 4 cell(s) where the header has 5"),
        (HEADER + 'a,0,team/main,5,"cpu=1\n', "malformed CSV"),
        (
            HEADER + "a,0,team/main,5,cpu=1\na,1,team/main,5,cpu=1\n",
            "trace.csv:3 name: job team/a already defined on line 2",
        ),
        ("name,submit,queue,runtime,requests,colour\n", "trace.csv:1 header: unknown column(s) colour"),
        ("name,submit,runtime\n", "missing column(s) queue"),
        ("", "empty trace"),
        (
            "name,submit,queue,runtime,count,minCount,requests\na,0,team/main,5,2,3,cpu=1\n",
            "trace.csv:2 minCount: must not exceed count (3 > 2)",
        ),
    ],
)
def test_bad_csv(text, expected):
    with pytest.raises(TraceError) as caught:
        trace.parse_csv(text, "trace.csv")
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"submit": 0, "queue": "a/b", "runtime": 1, "requests": {"cpu": 1}}\n{"submit": 0,\n',
            "trace.jsonl:2: not JSON",
        ),
        ("[1, 2]\n", "trace.jsonl:1: expected a JSON object"),
        ('{"submit": 0, "queue": "a/b", "runtime": 1, "cpu": 1}\n', "trace.jsonl:1 cpu: unknown field"),
        ('{"submit": 0, "queue": "a/b", "runtime": 1}\n', "trace.jsonl:1 requests: required"),
        (
            '{"submit": 0, "queue": "a/b", "runtime": 1, "podSets": [{"count": 0, "requests": {"cpu": 1}}]}\n',
            "podSets[0].count: must be at least 1",
        ),
        ('{"queue": "a/b", "runtime": 1, "requests": {"cpu": 1}}\n', "trace.jsonl:1 submit: required"),
    ],
)
def test_bad_jsonl(text, expected):
    with pytest.raises(TraceError) as caught:
        trace.parse_jsonl(text, "trace.jsonl")
    assert expected in str(caught.value)


def test_every_problem_is_listed_at_once():
    text = HEADER + "a,0,team/main,-5,cpu=1\nb,0,team/main,5,cpu=x\nc,0,team/main,5,cpu=1\n"
    with pytest.raises(TraceError) as caught:
        trace.parse_csv(text, "trace.csv")
    assert [p.split(" ")[0] for p in caught.value.problems] == ["trace.csv:2", "trace.csv:3"]


def test_unknown_queue_is_named_with_the_known_ones():
    jobs = trace.parse_csv(HEADER + "a,0,team/main,5,cpu=1\nb,0,tema/main,5,cpu=1\n", "trace.csv")
    with pytest.raises(TraceError) as caught:
        design(cluster_queue("team", "4")).check(jobs)
    assert (
        str(caught.value) == "trace.csv:3 queue: LocalQueue tema/main is not in the design (known: team/main)"
    )


def test_a_job_larger_than_the_whole_cohort():
    jobs = trace.parse_csv(HEADER + "huge,0,a/main,5,cpu=9\nfits,0,a/main,5,cpu=8\n", "trace.csv")
    cqs = design(cluster_queue("a", "4", cohort="pool"), cluster_queue("b", "4", cohort="pool"))
    with pytest.raises(TraceError) as caught:
        cqs.check(jobs)
    assert str(caught.value) == (
        "trace.csv:2 requests: needs 9 cpu but cohort pool can give ClusterQueue a at most 8: the job could never start"
    )


def test_a_job_above_the_borrowing_limit():
    jobs = trace.parse_csv(HEADER + "wide,0,a/main,5,cpu=7\n", "trace.csv")
    cqs = design(
        cluster_queue("a", "4", cohort="pool", borrowing_limit="2"), cluster_queue("b", "4", cohort="pool")
    )
    with pytest.raises(TraceError, match="at most 6"):
        cqs.check(jobs)


def test_a_resource_the_queue_does_not_cover():
    jobs = trace.parse_csv(HEADER + "gpu,0,a/main,5,cpu=1;nvidia.com/gpu=1\n", "trace.csv")
    with pytest.raises(TraceError, match=r"requests nvidia\.com/gpu, which ClusterQueue a does not cover"):
        design(cluster_queue("a", "4")).check(jobs)


def test_unknown_priority_class():
    jobs = trace.parse_csv("submit,queue,priority,runtime,requests\n0,a/main,urgent,5,cpu=1\n", "trace.csv")
    with pytest.raises(
        TraceError, match=r"trace\.csv:2 priority: no WorkloadPriorityClass or PriorityClass urgent"
    ):
        design(cluster_queue("a", "4")).check(jobs)


def test_cli_reports_bad_input_without_a_traceback(tmp_path: Path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(FLAVOR + cluster_queue("team", "4"))
    bad = tmp_path / "trace.csv"
    bad.write_text(HEADER + "a,0,team/main,-5,cpu=1\n")
    result = CliRunner().invoke(
        app, ["simulate", "--queues", str(queues), "--trace", str(bad), "--no-progress"]
    )
    assert result.exit_code == 2
    assert "trace.csv:2 runtime: must not be negative" in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--trace", "missing.csv"], "cannot read the trace"),
        (["--trace", "trace.txt"], "unknown trace format .txt"),
        ([], "give exactly one of --trace and --generator"),
    ],
)
def test_cli_input_errors(tmp_path: Path, args, expected):
    queues = tmp_path / "queues.yaml"
    queues.write_text(FLAVOR + cluster_queue("team", "4"))
    (tmp_path / "trace.txt").write_text("x")
    args = [a if not a.startswith(("missing", "trace.")) else str(tmp_path / a) for a in args]
    result = CliRunner().invoke(app, ["simulate", "--queues", str(queues), *args, "--no-progress"])
    assert result.exit_code == 2
    assert expected in result.output


def test_cli_rejects_a_design_with_jobs_in_it(tmp_path: Path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(
        FLAVOR + cluster_queue("team", "4") + "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n"
        "metadata: {name: w, namespace: team}\nspec:\n  queueName: main\n  podSets:\n  - name: main\n    count: 1\n"
        "    template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}\n"
    )
    good = tmp_path / "trace.csv"
    good.write_text(HEADER + "a,0,team/main,5,cpu=1\n")
    result = CliRunner().invoke(
        app, ["simulate", "--queues", str(queues), "--trace", str(good), "--no-progress"]
    )
    assert result.exit_code == 2
    assert "a design holds queue objects only; found Workload" in result.output


def test_cli_reports_an_unwritable_out_folder(tmp_path: Path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(FLAVOR + cluster_queue("team", "4"))
    good = tmp_path / "trace.csv"
    good.write_text(HEADER + "a,0,team/main,5,cpu=1\n")
    blocker = tmp_path / "taken"
    blocker.write_text("a file, not a folder")
    result = CliRunner().invoke(
        app,
        ["simulate", "--queues", str(queues), "--trace", str(good), "--out", str(blocker), "--no-progress"],
    )
    assert result.exit_code == 2
    assert "taken: cannot write the results" in result.output


def test_every_problem_of_a_trace_and_its_design_comes_in_one_run(tmp_path: Path):
    queues = tmp_path / "queues.yaml"
    queues.write_text(FLAVOR + "---\n" + cluster_queue("team", "4"), encoding="utf-8")
    rows = [
        "name,submit,queue,runtime,requests,colour",  # an unknown column: reported, rows still read
        "a,-1,team/main,soon,cpu=1,red",  # two bad fields in one row: both reported
        "b,0,nowhere/main,5,cpu=1,red",  # a LocalQueue the design lacks: the design's check
        "c,0,team/main,5,cpu=64,red",  # more than the queue could ever get
    ] + [f"z{i},0,team/main,0,cpu=1,red" for i in range(40)]  # the same problem on 40 lines
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["simulate", "--queues", str(queues), "--trace", str(path)])
    assert result.exit_code == 2
    out = " ".join(result.output.split())  # the console wraps long lines
    assert "trace.csv:1 header: unknown column(s) colour" in out
    assert "trace.csv:2 submit: must not be negative" in out
    assert "trace.csv:2 runtime: expected seconds or a duration" in out
    assert "trace.csv:3 queue: LocalQueue nowhere/main is not in the design" in out
    assert "trace.csv:4 requests: needs 64 cpu" in out
    assert "trace.csv:5-44 runtime: must be positive" in out  # every line named, once
    assert "more problem" not in out


def test_grouped_problems_keep_every_line():
    problems = [f"t.csv:{n} runtime: must be positive" for n in (3, 4, 5, 9)] + [
        "t.csv:6 queue: required",
        "t.csv: empty trace",
    ]
    assert trace.grouped(problems) == [
        "t.csv:3-5,9 runtime: must be positive",
        "t.csv:6 queue: required",
        "t.csv: empty trace",
    ]
