"""`make diff-upstream DIFF_ARGS="--cases N --seed S"`: random cases played on pykueue's scenario runner and
on upstream Kueue's scheduler (the oracle on a real kube-apiserver), compared step by step.

Each divergence is shrunk to the smallest case that still diverges, replayed on upstream (`--repeat`) to
tell upstream's own timing from a real difference, and written to OUT/<seed>-<case>.yaml as a scenario
whose `expect` is pykueue's result and whose `divergence.upstream` is upstream's. The last line printed is
`N cases, K divergences (D documented)`; the exit status is 1 when any divergence is undocumented.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.diff_upstream import compare, generator, known, parallel, shrink
from benchmarks.diff_upstream.parallel import CaseReport, PlayShare, Report
from benchmarks.diff_upstream.upstream import QUIET, NotSettled, OracleError, Upstream
from pykueue.devcluster.controlplane import ApiError
from pykueue.errors import ScenarioError
from pykueue.scenario import loader, runner

UPSTREAM_VERSION = "v0.19.2"
ROOT = Path(__file__).resolve().parents[2]
# Two cores: a case spends most of its time waiting on upstream's timers and quiet windows, so four
# workers keep both cores busy (docs/differential.md, "Throughput").
WORKERS = 4


@dataclass
class Outcome:
    """One play of a case on both sides: the first checkpoint that differs, if any."""

    case: dict[str, Any]
    pykueue_doc: dict[str, Any]
    checkpoint: int | None = None
    differences: list[str] = field(default_factory=list)
    ours: dict[str, Any] = field(default_factory=dict)
    theirs: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    views: list[dict[str, Any]] = field(default_factory=list)

    @property
    def diverges(self) -> bool:
        return self.checkpoint is not None


def _truncate(doc: dict[str, Any], upto: int | None) -> dict[str, Any]:
    """The pykueue case up to its `upto`-th checkpoint (all when None), without the checkpoints."""
    out = copy.deepcopy(doc)
    steps: list[dict[str, Any]] = []
    seen = 0
    for step in out["steps"]:
        if "expect" in step:
            if upto is not None and seen == upto:
                break
            seen += 1
            continue
        steps.append(step)
    out["steps"] = steps
    return out


def run_pykueue(doc: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], str | None]:
    """pykueue's result and checkpoints; a step it refuses ends the checkpoints there (with the error)."""
    try:
        result = runner.run(loader.parse(doc, doc["name"]))
        return result, result.get("checkpoints", []), None
    except ScenarioError as exc:
        error = str(exc)
    # Keep the checkpoints before the refused step: they show where the two sides parted.
    marks = sum(1 for s in doc["steps"] if "expect" in s)
    for upto in range(marks - 1, -1, -1):
        cut = copy.deepcopy(doc)
        kept, seen = [], 0
        for step in cut["steps"]:
            kept.append(step)
            if "expect" in step:
                seen += 1
                if seen == upto:
                    break
        cut["steps"] = kept
        try:
            result = runner.run(loader.parse(cut, doc["name"]))
            return result, result.get("checkpoints", []), error
        except ScenarioError:
            continue
    return {}, [], error


def play(up: Upstream, case: dict[str, Any]) -> Outcome:
    views, doc = up.play(case)
    result, checkpoints, error = run_pykueue(doc)
    out = Outcome(case, doc, result=result, views=views)
    for i, view in enumerate(views):
        theirs = compare.from_upstream(view)
        if i >= len(checkpoints):
            out.checkpoint, out.theirs = i, theirs
            out.differences = [f"pykueue refused the case: {error}"]
            return out
        ours = compare.from_pykueue(checkpoints[i])
        diffs = compare.differences(ours, theirs)
        if diffs:
            out.checkpoint, out.differences, out.ours, out.theirs = i, diffs, ours, theirs
            out.result = checkpoints[i]
            return out
    return out


def _conditions(reasons: dict[str, str], why: dict[str, str]) -> dict[str, Any]:
    """The compared conditions: QuotaReserved of waiting Workloads, Preempted of preempted ones."""
    out: dict[str, Any] = {}
    for key, reason in reasons.items():
        out.setdefault(key, {})["QuotaReserved"] = {"status": "False", "reason": reason}
    for key, reason in why.items():
        out.setdefault(key, {})["Preempted"] = {"status": "True", "reason": reason}
    return dict(sorted(out.items()))


def _expect_of(result: dict[str, Any]) -> dict[str, Any]:
    expect = {key: result[key] for key in ("admitted", "preempted", "pending", "inadmissible", "finished")}
    view = compare.from_pykueue(result)
    expect["conditions"] = _conditions(view["pendingReason"], view["preemptedWhy"])
    return expect


def _upstream_expect(view: dict[str, Any]) -> dict[str, Any]:
    return {
        "admitted": view["admitted"],
        "preempted": view["preempted"],
        "finished": view["finished"],
        "conditions": _conditions(view["pendingReason"], view["preemptedWhy"]),
        "contains": {"pending": view["pending"]},
    }


def write_divergence(path: Path, outcome: Outcome, reason: str, timing: bool) -> None:
    doc = _truncate(outcome.pykueue_doc, outcome.checkpoint or 0)
    doc["description"] = (
        "Found by `make diff-upstream` and shrunk; differences at the end of the steps:\n"
        + "\n".join(f"- {d}" for d in outcome.differences)
    )
    if outcome.result:
        doc["expect"] = _expect_of(outcome.result)
    doc["divergence"] = {
        "reason": reason,
        "upstream": _upstream_expect(outcome.theirs) if outcome.theirs else {},
        "upstreamVersion": UPSTREAM_VERSION,
        "timing": timing,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _not_settled(seed: int, index: int, case: dict[str, Any], exc: NotSettled, out: Path) -> CaseReport:
    path = out / f"{seed}-{index}.not-settled.yaml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    if exc.preemptions >= known.LOOP_PREEMPTIONS:
        line = (
            f"case {seed}/{index}: documented: {known.PREEMPTION_LOOP.name}, one Workload "
            f"preempted {exc.preemptions} times (docs/semantics.md: {known.PREEMPTION_LOOP.docs}) -> {path}"
        )
        return CaseReport(index, (line,), divergent=True, documented=True)
    return CaseReport(index, (f"case {seed}/{index}: UNDOCUMENTED: {exc} -> {path}",), divergent=True)


def run_case(
    up: Upstream, seed: int, index: int, *, out: Path, repeat: int, shrink_budget: int
) -> CaseReport:
    """Play case `index` of `seed`; a divergence is shrunk, replayed, classified and written to `out`."""
    case = generator.generate(seed, index)
    try:
        outcome = play(up, case)
    except NotSettled as exc:
        return _not_settled(seed, index, case, exc, out)
    except (OracleError, ApiError) as exc:
        return CaseReport(index, (f"case {seed}/{index}: upstream failed: {exc}",), divergent=True)
    if not outcome.diverges:
        return CaseReport(index, (f"case {seed}/{index}: same",))
    lines = [
        f"case {seed}/{index}: DIVERGES at step end {outcome.checkpoint}: " + "; ".join(outcome.differences)
    ]

    def still(cand: dict[str, Any]) -> bool:
        try:
            return play(up, cand).diverges
        except (OracleError, ApiError):
            # A smaller case upstream cannot play (a later step deactivates a Workload the shrinking
            # removed: 404) is not kept; NotSettled is an OracleError too, and not the divergence sought.
            return False

    small, used = shrink.shrink(case, still, budget=shrink_budget)
    final = play(up, small)
    if not final.diverges:  # upstream's timing gave the other result this time
        final = outcome
    # Timing: does upstream, played again, ever agree with pykueue?
    timing = any(not play(up, final.case).diverges for _ in range(repeat))
    match = known.classify(final.pykueue_doc, final.checkpoint or 0, final.theirs)
    if timing:
        reason = "upstream's result depends on timing: played again, it agreed with pykueue"
    elif match:
        reason = f"{match.name} (docs/semantics.md: {match.docs})"
    else:
        reason = "UNDOCUMENTED: " + "; ".join(final.differences)
    path = out / f"{seed}-{index}.yaml"
    write_divergence(path, final, reason, timing)
    lines.append(f"  shrunk in {used} plays -> {path}: {reason}")
    return CaseReport(index, tuple(lines), divergent=True, documented=bool(timing or match))


def player(*, seed: int, out: str, repeat: int, shrink_budget: int, quiet: float) -> PlayShare:
    """A worker's player: one API server and oracle for its whole share of the cases."""

    def play_share(indexes: list[int]) -> Iterator[CaseReport]:
        with (
            tempfile.TemporaryDirectory(prefix="diff-upstream-") as tmp,
            Upstream(Path(tmp), quiet=quiet).running() as up,
        ):
            for index in indexes:
                yield run_case(up, seed, index, out=Path(out), repeat=repeat, shrink_budget=shrink_budget)

    return play_share


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.diff_upstream", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--cases", type=int, default=20, help="how many cases (default 20)")
    parser.add_argument(
        "--seed", type=int, default=None, help="the generator's seed (default: from the clock, printed)"
    )
    parser.add_argument("--first", type=int, default=0, help="the index of the first case (default 0)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "out" / "diff-upstream", help="where divergences go"
    )
    parser.add_argument(
        "--repeat", type=int, default=2, help="replays on upstream of a divergent case (timing)"
    )
    parser.add_argument("--shrink-budget", type=int, default=25, help="plays spent shrinking one divergence")
    parser.add_argument(
        "--quiet",
        type=float,
        default=QUIET,
        help=f"seconds without change that end a step upstream (default {QUIET})",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=WORKERS,
        help=f"processes playing cases at once, each with its own API server and oracle (default {WORKERS})",
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, not {args.workers}")
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    print(f"seed {seed}, cases {args.first}..{args.first + args.cases - 1}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    options = {
        "seed": seed,
        "out": str(args.out),
        "repeat": args.repeat,
        "shrink_budget": args.shrink_budget,
        "quiet": args.quiet,
    }
    report = Report(args.first, args.cases, emit=lambda line: print(line, flush=True))
    shares = parallel.deal(args.first, args.cases, args.workers)
    if len(shares) == 1:  # in this process: no worker to start
        for case_report in player(**options)(shares[0]):
            report.add(case_report)
    else:
        parallel.run_parallel("benchmarks.diff_upstream.__main__:player", options, shares, report)
    print(report.last_line())
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
