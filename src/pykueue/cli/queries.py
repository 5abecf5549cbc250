"""The read-only client commands, `get`, `describe` and `logs`, run without typer.

These are the commands people run many times a day, and typer 0.29 imports click and
pydantic (about 0.35 s of CPU here) before any command starts. So their parameters are
declared once, in `COMMANDS`: the argparse parser that runs them is built from that
table (cli/main.py sends a run straight here), and so is the typer command that
`pykueue --help` and shell completion list.

Output goes to stdout, errors to stderr as ``error: ...`` with exit status 1; a
refusal from the server is printed as it wrote it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pykueue.cli.client import call, client

if TYPE_CHECKING:
    import typer

T = TypeVar("T")
LISTS = ("clusterqueues", "localqueues", "workloads", "jobs")
ALIASES = {"cq": "clusterqueues", "lq": "localqueues", "wl": "workloads", "job": "jobs"}


@dataclass(frozen=True)
class Param:
    """One parameter of a command: positional when it has no flags."""

    name: str
    help: str
    flags: tuple[str, ...] = ()
    default: str | None = None
    # The only values it takes; another is refused before anything runs (`-o yaml` printed a table).
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Command:
    run: Callable[..., None]
    help: str
    params: tuple[Param, ...]


# ------------------------------------------------------------------ shared with the other commands


def table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def when(rfc3339: str) -> str:
    """An estimated time as the local clock reads it, with how far away it is."""
    moment = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    seconds = max(0, round((moment - datetime.now(UTC)).total_seconds()))
    away = (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )
    return f"{moment.astimezone():%Y-%m-%d %H:%M} (in {away})"


def eta_cell(estimate: dict[str, Any] | None) -> str:
    if not estimate:
        return ""
    if not estimate.get("at"):
        return "unknown"
    return datetime.fromisoformat(estimate["at"].replace("Z", "+00:00")).astimezone().strftime("%m-%d %H:%M")


def position_text(explanation: dict[str, Any]) -> str:
    position = explanation.get("position")
    cq = explanation.get("clusterQueue") or "?"
    if position:
        return f"pending: position {position} of {explanation.get('pendingInQueue')} in ClusterQueue {cq}"
    return f"pending in ClusterQueue {cq}"


# ------------------------------------------------------------------ the commands


def get(
    what: str,
    namespace: str | None = None,
    output: str = "table",
    server: str | None = None,
    token: str | None = None,
    socket: str | None = None,
) -> None:
    """List queues, workloads or jobs."""
    listing = ALIASES.get(what, what)
    if listing not in LISTS:
        print(f"error: cannot get {what!r}: choose one of {', '.join(LISTS)}", file=sys.stderr)
        raise SystemExit(1)
    api = client(server, token, socket)
    rows: list[dict[str, Any]] = call(lambda: api.get(f"/api/v1/{listing}", namespace=namespace))
    if output == "json":
        print(json.dumps(rows, indent=2))
        return
    {
        "clusterqueues": _cluster_queue_table,
        "localqueues": _local_queue_table,
        "workloads": _workload_table,
    }.get(listing, _job_table)(rows)


def _cluster_queue_table(rows: list[dict[str, Any]]) -> None:
    table(
        [
            [
                r["name"],
                r["cohort"],
                "yes" if r["active"] else f"no ({r['stopPolicy']})",
                str(r["pending"]),
                str(r["admitted"]),
                ", ".join(
                    f"{u['flavor']}/{u['resource']} {u['used']}/{u['nominal']}"
                    + (f" (+{u['borrowed']} borrowed)" if u["borrowed"] not in ("0", "") else "")
                    for u in r["usage"]
                ),
            ]
            for r in rows
        ],
        ["NAME", "COHORT", "ACTIVE", "PENDING", "ADMITTED", "USAGE/NOMINAL"],
    )


def _local_queue_table(rows: list[dict[str, Any]]) -> None:
    table(
        [[r["namespace"], r["name"], r["clusterQueue"], str(r["pending"]), str(r["admitted"])] for r in rows],
        ["NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"],
    )


def _workload_table(rows: list[dict[str, Any]]) -> None:
    # A MultiKueue manager's workloads run on workers: say which, only where there are any.
    workers = any(r.get("worker") for r in rows)
    table(
        [
            [
                r["namespace"],
                r["name"],
                r["queue"],
                r["state"],
                r["clusterQueue"],
                *([r.get("worker") or ""] if workers else []),
                eta_cell(r.get("estimatedStart")),
                r["reason"][:80],
            ]
            for r in rows
        ],
        [
            "NAMESPACE",
            "NAME",
            "QUEUE",
            "STATE",
            "CLUSTERQUEUE",
            *(["WORKER"] if workers else []),
            "ESTIMATED START",
            "WHY",
        ],
    )


def _job_table(rows: list[dict[str, Any]]) -> None:
    columns = ["active", "succeeded", "failed", "preemptions"]
    table(
        [
            [r["namespace"], r.get("kind", "Job"), r["name"], r["queue"], r["state"]]
            + [str(r[c]) for c in columns]
            + [str(r.get("interruptions", 0))]
            for r in rows
        ],
        [
            "NAMESPACE",
            "KIND",
            "NAME",
            "QUEUE",
            "STATE",
            "ACTIVE",
            "SUCCEEDED",
            "FAILED",
            "PREEMPTED",
            "INTERRUPTED",
        ],
    )


def describe(
    what: str,
    name: str,
    namespace: str = "default",
    output: str = "text",
    server: str | None = None,
    token: str | None = None,
    socket: str | None = None,
) -> None:
    """Why a workload waits, in the cause words every view uses; its position, estimate and pods."""
    if what.lower() not in ("workload", "workloads", "wl", "job"):
        print("error: describe supports workload NAME (a job's name works too)", file=sys.stderr)
        raise SystemExit(1)
    api = client(server, token, socket)
    data: dict[str, Any] = call(lambda: api.get(f"/api/v1/describe/workload/{namespace}/{name}"))
    if output == "json":
        print(json.dumps(data, indent=2))
        return
    wl, explanation = data["workload"], data["explanation"]
    print(f"Workload:  {wl['namespace']}/{wl['name']}" + (f"  (job {wl['job']})" if wl["job"] else ""))
    print(f"Queue:     {wl['queue']}")
    print(f"State:     {explanation['state']}")
    if explanation.get("priority"):
        print(f"Priority:  {explanation['priority']}")
    if explanation.get("lostWork"):
        print(f"Lost work: {explanation['lostWork']} (thrown away by its preemptions)")
    if explanation["state"] == "Pending":
        print(f"Position:  {position_text(explanation)}")
        estimate = data.get("estimatedStart")
        if estimate and not estimate.get("at"):
            print(f"Estimated: {estimate['basis']}")
        elif estimate:
            print(
                f"Estimated: starts {when(estimate['at'])} (between {when(estimate['low'])} and "
                f"{when(estimate['high'])}; basis: {estimate['basis']})"
            )
        print("Waiting because:")
        for reason in explanation["reasons"]:
            print(f"  [{reason['category']}] {reason['message']}")
        if explanation.get("engineMessage"):
            print(f"Engine:    {explanation['engineMessage']}")
    elif explanation["state"] == "Admitted":
        print(f"Admitted:  ClusterQueue {explanation['clusterQueue']}")
    elif explanation["state"] == "QuotaReserved":
        print(
            f"Reserved:  quota in ClusterQueue {explanation['clusterQueue']}; the job starts once every check is Ready"
        )
        print("Waiting because:")
        for reason in explanation["reasons"]:
            print(f"  [{reason['category']}] {reason['message']}")
    elif explanation.get("reasons"):
        for reason in explanation["reasons"]:
            print(f"  [{reason['category']}] {reason['message']}")
    elif explanation.get("engineMessage"):
        print(f"Outcome:   {explanation['engineMessage']}")
    if wl.get("worker"):
        print(f"Worker:    {wl['worker']} (MultiKueue)")
    job = data.get("job")
    if job:
        kind = job.get("kind", "Job")
        restarts = f", restarted {job.get('restarts', 0)} time(s)" if kind == "JobSet" else ""
        print(
            f"{kind + ':':<11}{job['state']}, active {job['active']}, succeeded {job['succeeded']}, "
            f"failed {job['failed']}{restarts}, preempted {job['preemptions']} time(s), "
            f"interrupted by server restarts {job.get('interruptions', 0)} time(s)"
        )
        if job.get("owner"):
            print(
                f"Runs as:   {job['owner']}"
                + (f" (submitted by {job['submittedBy']})" if job.get("submittedBy") else "")
            )
        usage = job.get("usage") or {}
        if usage.get("cpuSeconds") or usage.get("memoryPeakBytes"):
            print(
                f"Used:      {usage.get('cpuSeconds', 0)} CPU-seconds, peak memory "
                f"{int(usage.get('memoryPeakBytes', 0)) // 2**20} MiB (pods that ended)"
            )
        if job.get("waiting"):
            print(f"           {job['waiting']}")
        if job.get("lastFailure") and not job.get("failure"):
            print(
                f"Crashed:   {job['lastFailure']} ({job['failed']} failure(s) so far; retried after a back-off)"
            )
        if job.get("failure"):
            print(f"Failed:    {job['failure']}")
    for pod in data.get("pods") or []:
        print(
            f"Pod {pod.get('name') or pod['index']}:  index {pod['index']} pid {pod['pid']} "
            f"user {pod.get('user', '?')} devices [{','.join(pod['devices'])}]"
        )
    for warning in data.get("warnings") or []:
        print(f"Warning:   {warning}")
    print("Conditions:")
    for cond in data.get("conditions") or []:
        print(f"  {cond['type']}={cond['status']} {cond.get('reason', '')}: {cond.get('message', '')}")


def logs(
    name: str,
    namespace: str = "default",
    server: str | None = None,
    token: str | None = None,
    socket: str | None = None,
) -> None:
    """Print the output of a job's pods."""
    api = client(server, token, socket)
    text = call(lambda: api.get(f"/api/v1/logs/{namespace}/{name}"))
    print(text, end="")


def report(what: str, **options: Any) -> None:
    """Usage, cost and lost work per tenant, or quota efficiency (cli/report.py)."""
    from pykueue.cli import report as reports

    reports.run(what, **options)


# ------------------------------------------------------------------ one declaration, two parsers

CONNECTION = (
    Param("server", "URL of the pykueue API (default: PYKUEUE_SERVER or the client config).", ("--server",)),
    Param("token", "API token (default: PYKUEUE_TOKEN or the client config).", ("--token",)),
    Param(
        "socket",
        "The server's Unix socket; no token needed (default: PYKUEUE_SOCKET, or found).",
        ("--socket",),
    ),
)
NAMESPACE = Param("namespace", "Namespace of the object.", ("--namespace", "-n"), "default")

COMMANDS: dict[str, Command] = {
    "get": Command(
        get,
        "List queues, workloads or jobs.",
        (
            Param("what", "clusterqueues | localqueues | workloads | jobs"),
            Param("namespace", "Only this namespace.", ("--namespace", "-n")),
            Param("output", "table or json", ("--output", "-o"), "table", ("table", "json")),
            *CONNECTION,
        ),
    ),
    "describe": Command(
        describe,
        "Why a workload waits, in the cause words every view uses; its position, estimate and pods.",
        (
            Param("what", "workload"),
            Param("name", "Workload name, or the name of its job."),
            NAMESPACE,
            Param("output", "text or json", ("--output", "-o"), "text", ("text", "json")),
            *CONNECTION,
        ),
    ),
    "logs": Command(
        logs,
        "Print the output of a job's pods.",
        (Param("name", "Job (or workload) name."), NAMESPACE, *CONNECTION),
    ),
    "report": Command(
        report,
        "Usage, cost and lost (preempted) work per tenant or queue, or quota efficiency (docs/governance.md).",
        (
            Param("what", "usage | efficiency"),
            Param("since", "Start: a duration back from now (24h, 7d) or a time.", ("--since",), "24h"),
            Param("until", "End: a duration back from now or a time (default: now).", ("--until",)),
            Param("by", "namespace | tenant | localqueue | clusterqueue", ("--by",), "namespace"),
            # `report` checks its own values, --by and --format alike (cli/report.py).
            Param("output", "table, csv or json", ("--format", "-o"), "table"),
            Param(
                "kubeconfig",
                "Report on this cluster's Workloads instead of the standalone server.",
                ("--kubeconfig",),
            ),
            Param("context", "kubeconfig context (default: current).", ("--context",)),
            *CONNECTION,
        ),
    ),
}


def parser(name: str) -> argparse.ArgumentParser:
    command = COMMANDS[name]
    out = argparse.ArgumentParser(prog=f"pykueue {name}", description=command.help)
    for param in command.params:
        if param.flags:
            out.add_argument(
                *param.flags, dest=param.name, default=param.default, help=param.help, choices=param.choices
            )
        else:
            out.add_argument(param.name, help=param.help)
    return out


def main(argv: list[str]) -> int:
    """Run ``argv`` (the command's name first); usage errors exit 2, as typer's do."""
    name, *rest = argv
    COMMANDS[name].run(**vars(parser(name).parse_args(rest)))
    return 0


def register(app: typer.Typer) -> None:
    """List the commands in typer's help and completion, with the parameters declared above."""
    for name, command in COMMANDS.items():
        app.command(name, help=command.help)(_typer_function(command))


def _typer_function(command: Command) -> Callable[..., None]:
    import inspect

    import typer

    def run(**values: Any) -> None:
        for p in command.params:
            if p.choices and values.get(p.name) not in p.choices:
                print(
                    f"error: {'/'.join(p.flags)}: invalid choice {values.get(p.name)!r} "
                    f"(choose from {', '.join(p.choices)})",
                    file=sys.stderr,
                )
                raise SystemExit(2)
        command.run(**values)

    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                p.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=str,
                default=typer.Option(p.default, *p.flags, help=p.help)
                if p.flags
                else typer.Argument(..., help=p.help),
            )
            for p in command.params
        ]
    )
    return run
