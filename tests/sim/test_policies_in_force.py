"""The simulator's summary lists the aging and preemption contracts in force (issue 44, item 6):
per ClusterQueue, from its annotations or the design's site default, in the JSON, the terminal
tables and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import designs
from pykueue.cli.main import app

DESIGN = designs.dump(
    designs.flavor(),
    designs.cluster_queue(
        "research",
        annotations={
            "pykueue.io/aging": '{"rate": "1/10m", "cap": 100, "priorityClasses": ["research"], "maxPriority": 50}'
        },
    ),
    designs.cluster_queue(
        "training",
        annotations={
            "pykueue.io/preemption-contract": '{"minRunTime": "20m", "maxPreemptions": 2, "window": "24h"}'
        },
    ),
    designs.local_queue("research", "research", name="main"),
    designs.local_queue("training", "training", name="main"),
)
SITE_DEFAULT = """\
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
pykueue:
  preemptionContract: {minRunTime: 1h30m}
"""
TRACE = "name,queue,submit,runtime,requests\na,research/main,0,60,cpu=1\nb,training/main,0,60,cpu=1\n"


def _simulate(tmp_path: Path, design: str) -> tuple[str, dict, str]:
    return _simulate_trace(tmp_path, design, TRACE)


def _simulate_trace(tmp_path: Path, design: str, trace: str) -> tuple[str, dict, str]:
    (tmp_path / "queues.yaml").write_text(design, encoding="utf-8")
    (tmp_path / "trace.csv").write_text(trace, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--queues",
            str(tmp_path / "queues.yaml"),
            "--trace",
            str(tmp_path / "trace.csv"),
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ],
        env={"COLUMNS": "120"},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return result.stdout, summary, (tmp_path / "out" / "report.html").read_text()


def test_annotations_are_listed_per_cluster_queue(tmp_path: Path):
    out, summary, html = _simulate(tmp_path, DESIGN)
    assert summary["policies"] == {
        "aging": {
            "research": "1 point(s) per 10m of wait, at most 100; priority classes research; "
            "workloads of priority up to 50"
        },
        "preemptionContract": {"training": "minRunTime 20m, at most 2 preemption(s) per 24h"},
        "preemptionCost": {},
        "reservation": {},
        "siteDefaultContract": "none",
    }
    assert "policies in force" in out
    assert "1 point(s) per 10m of wait, at most 100" in out
    assert "minRunTime 20m, at most 2 preemption(s) per 24h" in out
    assert "Policies in force" in html and "minRunTime 20m" in html


def test_the_site_default_contract_is_named_where_it_applies(tmp_path: Path):
    _, summary, _ = _simulate(tmp_path, DESIGN + SITE_DEFAULT)
    assert summary["policies"]["siteDefaultContract"] == "minRunTime 1h30m"
    assert summary["policies"]["preemptionContract"] == {
        "research": "minRunTime 1h30m (site default)",  # no annotation of its own
        "training": "minRunTime 20m, at most 2 preemption(s) per 24h",  # its own replaces the default
    }


def test_a_design_without_policies_says_so(tmp_path: Path):
    plain = DESIGN.replace("pykueue.io/aging", "example.com/note").replace(
        "pykueue.io/preemption-contract", "example.com/other"
    )
    out, summary, _ = _simulate(tmp_path, plain)
    assert summary["policies"] == {
        "aging": {},
        "preemptionContract": {},
        "preemptionCost": {},
        "reservation": {},
        "siteDefaultContract": "none",
    }
    assert out.count("none (upstream behaviour)") == 4


def test_the_plan_page_names_each_designs_policies(tmp_path: Path):
    (tmp_path / "a.yaml").write_text(DESIGN, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(DESIGN + SITE_DEFAULT, encoding="utf-8")
    (tmp_path / "trace.csv").write_text(TRACE, encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "plan",
            *("--queues", str(tmp_path / "a.yaml"), "--queues", str(tmp_path / "b.yaml")),
            *("--trace", str(tmp_path / "trace.csv"), "--out", str(tmp_path / "out")),
            *("--no-progress", "--seeds", "1"),
        ],
    )
    assert result.exit_code == 0, result.output
    html = (tmp_path / "out" / "plan.html").read_text()
    assert "Policies in force" in html
    assert "b: aging research (1 point(s) per 10m of wait" in html
    assert "research (minRunTime 1h30m (site default))" in html


def test_reservations_are_listed_from_the_queue_its_cohort_or_the_site(tmp_path: Path):
    """pykueue.io/reservation (issue 45, item 1): a queue's own, else its cohort's, else the site's."""
    own = designs.cluster_queue("gang", annotations={"pykueue.io/reservation": '{"after": "2h"}'})
    member = designs.cluster_queue("member")
    for cq in (own, member):
        cq["spec"]["cohortName"] = "pool"
    design = designs.dump(
        designs.flavor(),
        own,
        member,
        designs.cluster_queue("alone"),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "pool", "annotations": {"pykueue.io/reservation": '{"after": "30m"}'}},
            "spec": {},
        },
        designs.local_queue("gang", "gang", name="main"),
    )
    site = "---\napiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\npykueue:\n  reservation: {after: 6h}\n"
    out, summary, _ = _simulate_trace(
        tmp_path, design + site, "name,queue,submit,runtime,requests\na,gang/main,0,60,cpu=1\n"
    )
    assert summary["policies"]["reservation"] == {
        "alone": "after 6h of wait, backfill by declared limit (site default)",
        "gang": "after 2h of wait, backfill by declared limit",
        "member": "after 30m of wait, backfill by declared limit (Cohort pool)",
    }
    assert "after 30m of wait, backfill by declared limit (Cohort pool)" in out
