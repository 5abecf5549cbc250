"""`pykueue demo`: the example queues run through the engine, explained in the terminal.

This is what `make run` shows until the standalone server exists: the
manifests in examples/ are loaded, the scheduler runs until nothing changes,
and every decision is printed with its reason; then a later arrival is
applied so a reclaim by preemption can be seen.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from pykueue.api import manifests, quantity
from pykueue.engine import loading, scheduler
from pykueue.engine.events import ADMITTED, FINISHED, PENDING, PREEMPTED
from pykueue.engine.state import State
from pykueue.errors import InputError
from pykueue.scenario import runner

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"  # shipped in the wheel
SECOND = 10**6  # the engine counts microseconds
MINUTE = 60 * SECOND


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    phases: list[Path] = typer.Argument(
        None,
        help="Manifest files applied one phase at a time (default: the example files shipped with pykueue).",
    ),
) -> None:
    """Run example queues and jobs through the engine and explain every decision."""
    files = phases or [EXAMPLES / "queues.yaml", EXAMPLES / "workloads.yaml", EXAMPLES / "arrivals.yaml"]
    console = Console(highlight=False)
    state = State()
    try:
        batches = [manifests.load_paths([path]) for path in files]
    except InputError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    seen_events = 0
    for phase, (path, objects) in enumerate(zip(files, batches, strict=True)):
        state.set_clock(phase * MINUTE)  # each phase a minute later, so admission times differ
        console.rule(f"[bold]apply {path}[/bold] ({len(objects)} objects)")
        for obj in objects:
            loading.apply(state, obj)
        cycles = _settle(state)
        console.print(f"the scheduler ran {cycles} cycle(s) until nothing changed:")
        seen_events = _print_events(console, state, seen_events)
        _print_queues(console, state)
        _print_workloads(console, state)


def _settle(state: State) -> int:
    """Run cycles until nothing changes, a second of clock apart so admission times differ."""
    for count in range(1, runner.MAX_SETTLE_CYCLES + 1):
        before = runner.fingerprint(state)
        state.set_clock(state.now + SECOND)
        result = scheduler.run_cycle(state)
        if not result.changed and runner.fingerprint(state) == before:
            return count
    return runner.MAX_SETTLE_CYCLES


_STYLE = {ADMITTED: "green", PREEMPTED: "red", PENDING: "yellow", FINISHED: "blue"}


def _print_events(console: Console, state: State, start: int) -> int:
    for event in state.events[start:]:
        style = _STYLE.get(event.type, "white")
        console.print(
            f"  cycle {event.cycle:>2}  [{style}]{event.type:<9}[/{style}] {event.workload}: {event.message}"
        )
    return len(state.events)


def _print_queues(console: Console, state: State) -> None:
    table = Table(title="ClusterQueues", title_justify="left")
    for column in ("queue", "cohort", "flavor/resource", "used", "nominal", "borrowed"):
        table.add_column(column)
    for name, cq in state.cluster_queues.items():
        usage = state.cq_usage.get(name, {})
        for (flavor, resource), quota in sorted(cq.quotas.items()):
            used = usage.get((flavor, resource), 0)
            borrowed = max(0, used - quota.nominal)
            table.add_row(
                name,
                cq.cohort or "-",
                f"{flavor}/{resource}",
                quantity.format_milli(used),
                quantity.format_milli(quota.nominal),
                quantity.format_milli(borrowed) if borrowed else "",
            )
    console.print(table)


def _print_workloads(console: Console, state: State) -> None:
    table = Table(title="Workloads", title_justify="left")
    for column in ("workload", "state", "queue", "why"):
        table.add_column(column, overflow="fold")
    for key, wl in sorted(state.workloads.items()):
        if wl.admission is not None:
            pods = ", ".join(f"{ps.name} x{ps.count}" for ps in wl.admission.pod_sets)
            status = "[green]admitted, borrowing[/green]" if wl.borrowing else "[green]admitted[/green]"
            table.add_row(key, status, wl.admission.cluster_queue, pods)
            continue
        queue = state.route_of(wl) or "-"
        parked = queue != "-" and key in state.queues[queue].inadmissible
        status = "[yellow]parked[/yellow]" if parked else "[yellow]waiting[/yellow]"
        reserved = wl.conditions.get("QuotaReserved")
        why = reserved.message if reserved is not None else "not yet considered"
        table.add_row(key, status, queue, why)
    console.print(table)
