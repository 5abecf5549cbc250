"""`pykueue simulate` and `pykueue plan`: the engine on a virtual clock, and designs compared.

    pykueue simulate --queues queues.yaml --trace jobs.csv --out report/
    pykueue simulate --generator generator.yaml --out report/
    pykueue plan --trace jobs.csv --queues a.yaml --queues b.yaml --out plan/
    pykueue simulate --queues manager/ --cluster w1=w1/ --cluster w2=w2/ --trace jobs.csv

Bad input (a trace line, a generator field, a manifest) is printed as
``error: file:line field: message`` with exit code 2, never as a traceback.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pykueue.api import manifests
from pykueue.errors import EngineError, InputError
from pykueue.sim import (
    checker,
    driver,
    federation,
    generator,
    plan,
    plan_page,
    report_html,
    simulation,
    tables,
    trace,
)
from pykueue.sim.design import Design
from pykueue.sim.jobs import SECOND, Job


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
    app.command("plan")(plan_command)


def _inputs(
    queues: list[Path],
    trace_path: Path | None,
    generator_path: Path | None,
    clusters: list[str] | None = None,
) -> tuple[list[Design], list[Job], str, list[str]]:
    """The designs, the jobs, a name for the input, and notes; InputError when anything is wrong."""
    if (trace_path is None) == (generator_path is None):
        raise InputError("give exactly one of --trace and --generator")
    if clusters and generator_path is not None:
        raise InputError(
            "--cluster needs --trace and a manager design in --queues (a generator makes no workers)"
        )
    notes: list[str] = []
    if generator_path is not None:
        generated = generator.load(generator_path)
        notes.extend(generated.notes)
        jobs = generated.jobs
        source = str(generator_path)
        designs = [Design.load(path) for path in queues] or [
            Design(generator_path.parent.name or "generated", generated.objects, generated.cq_classes)
        ]
        for design in designs:
            for name, cls in generated.cq_classes.items():
                design.cq_classes.setdefault(name, cls)
        return designs, jobs, source, notes
    assert trace_path is not None
    if not queues:
        raise InputError(
            "--queues is required with --trace (the trace names LocalQueues, the design defines them)"
        )
    designs = [Design.load(path) for path in queues]
    _attach_workers(designs, clusters or [])
    problems: list[str] = []
    jobs = trace.load(trace_path, problems)
    _check_all(designs, jobs, problems)
    return designs, jobs, str(trace_path), notes


def _attach_workers(designs: list[Design], clusters: list[str]) -> None:
    """Give each manager design the worker designs of ``--cluster NAME=PATH`` its MultiKueueClusters name."""
    pool = federation.load_workers(clusters)
    for design in designs:
        federation.attach(design, pool, strict=len(designs) == 1)
    used = {name for design in designs if design.federation is not None for name in design.federation.workers}
    unused = [name for name in pool if name not in used]
    if unused:
        raise InputError(f"--cluster {unused[0]}: no design has a MultiKueueCluster {unused[0]}")
    for design in designs:
        if design.federation is not None:
            for name, worker in design.federation.workers.items():
                design.notes.extend(
                    f"worker {name}: {note}" for note in worker.notes if note not in design.notes
                )


def _check_all(designs: list[Design], jobs: list[Job], problems: list[str]) -> None:
    """The trace's problems and every design's with its good rows, in one TraceError."""
    for design in designs:
        try:
            design.check(jobs)
        except trace.TraceError as exc:
            prefix = f"design {design.name}: " if len(designs) > 1 else ""
            problems.extend(problem if not prefix else _prefixed(problem, prefix) for problem in exc.problems)
    if problems:
        raise trace.TraceError(problems)


def _prefixed(problem: str, prefix: str) -> str:
    """``file:line field: message`` with the design named in front of the message."""
    head, _, rest = problem.partition(" ")
    field, colon, message = rest.partition(": ")
    return f"{head} {field}{colon}{prefix}{message}" if colon else f"{prefix}{problem}"


def _unique_names(designs: list[Design]) -> None:
    seen: dict[str, int] = {}
    for design in designs:
        count = seen.get(design.name, 0)
        seen[design.name] = count + 1
        if count:
            design.name = f"{design.name}-{count + 1}"


def _progress_bar(console: Console, enabled: bool) -> tuple[Progress | None, driver.Progress | None]:
    if not enabled:
        return None, None
    bar = Progress(
        TextColumn("[bold]simulating[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs finished"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task("", total=None)

    def update(done: int, total: int, now: int) -> None:
        bar.update(task, completed=done, total=total, description=f"t={now / SECOND:,.1f}s")

    return bar, update


def seconds(value: int) -> str:
    """Microseconds as seconds without trailing zeros; empty for a time that never came (-1)."""
    return "" if value < 0 else f"{value / SECOND:.6f}".rstrip("0").rstrip(".")


def _write_jobs_csv(path: Path, run: driver.Run) -> None:
    rec = run.recorder
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "job",
                "class",
                "clusterQueue",
                "priority",
                "submit_s",
                "first_admission_s",
                "last_admission_s",
                "finish_s",
                "wait_s",
                "to_last_admission_s",
                "completion_delay_s",
                "evictions",
                "lost_s",
                "preempted_by",
                "preemption_reasons",
                *(["cluster"] if run.clusters is not None else []),
            ]
        )
        for i, job in enumerate(rec.jobs):
            wait = rec.first_admit[i] - job.submit if rec.first_admit[i] >= 0 else -1
            to_last = rec.last_admit[i] - job.submit if rec.last_admit[i] >= 0 else -1
            suffered = rec.preempted_by.get(i, [])
            writer.writerow(
                [
                    job.key,
                    job.job_class,
                    rec.cq_of[i],
                    job.priority,
                    seconds(job.submit),
                    seconds(rec.first_admit[i]),
                    seconds(rec.last_admit[i]),
                    seconds(rec.finish[i]),
                    seconds(wait),
                    seconds(to_last),
                    seconds(rec.completion_delay(i)),
                    rec.evictions[i],
                    seconds(rec.lost_time[i]),
                    ";".join(
                        f"{rec.jobs[p.by].key}@{rec.cq_of[p.by]}" if p.by >= 0 else "?" for p in suffered
                    ),
                    ";".join(p.reason or "?" for p in suffered),
                    *([run.clusters.site[i]] if run.clusters is not None else []),
                ]
            )


@contextmanager
def _writing(out: Path) -> Iterator[None]:
    """Create the output folder; a file system problem is bad input, not a traceback."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        yield
    except OSError as exc:
        raise InputError(f"{out}: cannot write the results: {exc.strerror or exc}") from exc


def _write_plan(
    out: Path,
    outcomes: list[plan.Outcome],
    noise_floor: float = plan.NOISE_FLOOR,
    chosen: list[tuple[int, int]] | None = None,
) -> None:
    for outcome in outcomes:
        (out / f"summary-{outcome.name}.json").write_text(dumps(outcome.summary), encoding="utf-8")
        (out / f"report-{outcome.name}.html").write_text(
            report_html.render(outcome.run, outcome.summary), encoding="utf-8"
        )
    (out / "plan.html").write_text(
        plan_page.render_html(outcomes, noise_floor, chosen or []), encoding="utf-8"
    )
    (out / "plan.json").write_text(
        dumps(plan_page.figures_json(outcomes, noise_floor, chosen or [])), encoding="utf-8"
    )


def _warn_notes(designs: list[Design]) -> None:
    """What a design says that changes nothing (weights with fair sharing off, unsimulated sections)."""
    console = Console(stderr=True, highlight=False)
    for design in designs:
        for note in design.notes:
            console.print(f"[yellow]warning:[/yellow] {escape(note)}", soft_wrap=True)


def _error(kind: str, exc: Exception) -> None:
    Console(stderr=True, highlight=False).print(f"[red]{kind}:[/red] {escape(str(exc))}", soft_wrap=True)


def _cycle_time(text: str) -> int:
    return _duration_option(text, "--cycle-time")


def _latency(text: str, designs: list[Design]) -> int:
    value = _duration_option(text, "--dispatch-latency")
    if value and not any(design.federation is not None for design in designs):
        raise InputError("--dispatch-latency: no design has MultiKueue workers (give them with --cluster)")
    return value


def _outages(texts: list[str], designs: list[Design]) -> tuple[tuple[str, int, int], ...]:
    workers = {
        name for design in designs if design.federation is not None for name in design.federation.workers
    }
    result = []
    for text in texts:
        name, start, end = federation.parse_outage(text)
        if name not in workers:
            known = ", ".join(sorted(workers)) or "none: give them with --cluster"
            raise InputError(f"--outage {text}: no worker {name} (workers: {known})")
        result.append((name, start, end))
    return tuple(result)


def _duration_option(text: str, option: str) -> int:
    try:
        return trace.duration(text, option)
    except trace.FieldProblem as problem:
        raise InputError(f"{option}: {problem}") from problem


def dumps(summary: dict[str, Any]) -> str:
    """The summary as stable JSON text (byte-identical for equal runs)."""
    return json.dumps(summary, indent=2, sort_keys=True) + "\n"


def simulate(
    queues: list[Path] = typer.Option(
        [], "--queues", help="Queue manifests (ClusterQueues, LocalQueues...); optional with --generator."
    ),
    trace_path: Path | None = typer.Option(None, "--trace", help="A trace: .csv or .jsonl, one job per row."),
    generator_path: Path | None = typer.Option(
        None, "--generator", help="An upstream scheduler-performance generator.yaml."
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for summary.json, report.html and jobs.csv."),
    seed: int = typer.Option(
        0, "--seed", help="Seed of the workload uids (the last queue-order tie-breaker)."
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar (default: on a terminal)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON summary instead of the tables."),
    cycle_time: str = typer.Option(
        "0", "--cycle-time", help="How long one scheduling cycle takes (e.g. 10ms); 0 settles at each event."
    ),
    clusters: list[str] = typer.Option(
        [],
        "--cluster",
        help="A MultiKueue worker: NAME=PATH, NAME a MultiKueueCluster of the manager design, PATH its queues.",
    ),
    dispatch_latency: str = typer.Option(
        "0", "--dispatch-latency", help="MultiKueue: how long a copy takes to reach a worker (e.g. 2s)."
    ),
    outages: list[str] = typer.Option(
        [],
        "--outage",
        help="MultiKueue: NAME=START..END, a worker the manager cannot reach then (e.g. w1=1h..3h).",
    ),
    rangespec: Path | None = typer.Option(
        None,
        "--rangespec",
        help="Check the figures against upstream's rangespec.yaml; exit 1 when one fails.",
    ),
) -> None:
    """Replay a trace (or an upstream generator file) on a quota design in virtual time."""
    console = Console(stderr=as_json, highlight=False)
    try:
        designs, jobs, source, notes = _inputs(queues, trace_path, generator_path, clusters)
        if len(designs) > 1:
            raise InputError("simulate takes one design; use `pykueue plan` to compare several")
        design = designs[0]
        _warn_notes(designs)
        spec = checker.load(rangespec) if rangespec is not None else None
        checked = design.check(jobs)
        show = progress if progress is not None else sys.stderr.isatty()
        bar, update = _progress_bar(Console(stderr=True), show)
        options = driver.Options(
            seed=seed,
            progress=update,
            cycle_time=_cycle_time(cycle_time),
            dispatch_latency=_latency(dispatch_latency, designs),
            outages=_outages(outages, designs),
        )
        if bar is not None:
            with bar:
                run = simulation.simulate(design, checked, options)
        else:
            run = simulation.simulate(design, checked, options)
        run.notes.extend(notes)
        summary = run.summary(source)
        if out is not None:
            with _writing(out):
                (out / "summary.json").write_text(dumps(summary), encoding="utf-8")
                (out / "report.html").write_text(report_html.render(run, summary), encoding="utf-8")
                _write_jobs_csv(out / "jobs.csv", run)
                if generator_path is not None and not queues:
                    (out / "design.yaml").write_text(manifests.dump_yaml(design.objects), encoding="utf-8")
    except InputError as exc:
        _error("error", exc)
        raise typer.Exit(2) from exc
    except EngineError as exc:
        _error("engine error", exc)
        raise typer.Exit(1) from exc
    if as_json:
        sys.stdout.write(dumps(summary))
    else:
        console.print(tables.summary_table(summary))
        console.print(tables.policies_table(summary))
        console.print(tables.checker_table(summary))
        console.print(tables.queues_table(summary))
        if "multiKueue" in summary:
            console.print(tables.clusters_table(summary))
        if out is not None:
            console.print(f"wrote {out / 'summary.json'}, {out / 'report.html'}, {out / 'jobs.csv'}")
    if spec is not None:
        verdicts = checker.check(spec, summary)
        console.print(tables.verdicts_table(verdicts, str(rangespec)))
        if not all(v.ok for v in verdicts):
            raise typer.Exit(1)


def plan_command(
    queues: list[Path] = typer.Option(
        ..., "--queues", help="A design's queue manifests; give it once per design."
    ),
    trace_path: Path | None = typer.Option(None, "--trace", help="A trace: .csv or .jsonl."),
    generator_path: Path | None = typer.Option(
        None, "--generator", help="Take the jobs from a generator file instead."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Folder for plan.html and one summary JSON per design."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the workload uids, the same for every design."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Show a progress bar (default: on a terminal)."
    ),
    cycle_time: str = typer.Option(
        "0", "--cycle-time", help="How long one scheduling cycle takes (e.g. 10ms); 0 settles at each event."
    ),
    seeds: int = typer.Option(
        3, "--seeds", min=1, help="Runs per design, seeds --seed, --seed+1, ...: figures are their means."
    ),
    jitter: str = typer.Option(
        "0", "--jitter", help="Move each arrival later by up to this much (e.g. 30s), drawn per seed."
    ),
    noise_floor: float = typer.Option(
        plan.NOISE_FLOOR, "--noise-floor", min=0, help="Differences under this % are within noise."
    ),
    clusters: list[str] = typer.Option(
        [],
        "--cluster",
        help="A MultiKueue worker for the designs naming it: NAME=PATH, NAME a MultiKueueCluster of the manager design, PATH its queues.",
    ),
    dispatch_latency: str = typer.Option(
        "0", "--dispatch-latency", help="MultiKueue: how long a copy takes to reach a worker (e.g. 2s)."
    ),
    outages: list[str] = typer.Option(
        [],
        "--outage",
        help="MultiKueue: NAME=START..END, a worker the manager cannot reach then (e.g. w1=1h..3h).",
    ),
    compare: list[str] = typer.Option(
        [],
        "--compare",
        help="A:B, two designs by name: B's difference from A per figure, with its range over the seeds.",
    ),
) -> None:
    """Run one trace on several quota designs and show them side by side."""
    console = Console(highlight=False)
    try:
        designs, jobs, source, _ = _inputs(queues, trace_path, generator_path, clusters)
        if len(designs) < 2:
            raise InputError("plan compares designs: give --queues at least twice")
        _unique_names(designs)
        chosen = plan.pairs(compare, [design.name for design in designs])
        _warn_notes(designs)
        show = progress if progress is not None else sys.stderr.isatty()
        bar, update = _progress_bar(Console(stderr=True), show)
        options = driver.Options(
            seed=seed,
            progress=update,
            cycle_time=_cycle_time(cycle_time),
            dispatch_latency=_latency(dispatch_latency, designs),
            outages=_outages(outages, designs),
        )
        spread = _duration_option(jitter, "--jitter")
        if bar is not None:
            with bar:
                outcomes = plan.run_all(designs, jobs, source, options, seeds, spread)
        else:
            outcomes = plan.run_all(designs, jobs, source, options, seeds, spread)
        if out is not None:
            with _writing(out):
                _write_plan(out, outcomes, noise_floor, chosen)
    except InputError as exc:
        _error("error", exc)
        raise typer.Exit(2) from exc
    except EngineError as exc:
        _error("engine error", exc)
        raise typer.Exit(1) from exc
    console.print(plan.table(outcomes, noise_floor, console.width))
    console.print(plan.teams_table(outcomes, noise_floor, width=console.width))
    for first, second in chosen:
        console.print(plan.compare_table(outcomes, first, second, noise_floor))
    if out is not None:
        console.print(f"wrote {out / 'plan.html'}")
