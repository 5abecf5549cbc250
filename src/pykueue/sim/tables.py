"""The rich terminal tables: a run's headline figures, upstream's checker figures, the queues."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from pykueue.sim.report_html import headline_rows

MAX_QUEUE_ROWS = 20


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def summary_table(summary: dict[str, Any]) -> Table:
    table = Table(title=f"simulation of {summary['design']}", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in headline_rows(summary):
        table.add_row(name, _fmt(value))
    return table


def checker_table(summary: dict[str, Any]) -> Table:
    checker = summary["checker"]
    table = Table(title="upstream checker figures", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("wall (virtual) time, ms", _fmt(checker["cmd"]["wallMs"]))
    for cls, values in checker["clusterQueueClasses"].items():
        table.add_row(f"ClusterQueue class {cls}: usage %", _fmt(values["usagePercent"]))
    for cls, values in checker["workloadClasses"].items():
        table.add_row(f"class {cls}: avg time to admission, ms", _fmt(values["averageTimeToAdmissionMs"]))
    return table


def queues_table(summary: dict[str, Any]) -> Table:
    primary = summary["totals"]["primaryResource"]
    queues = summary["clusterQueues"]
    names = sorted(queues, key=lambda n: (-(queues[n]["wait"].get("mean") or 0), n))
    shown = names[:MAX_QUEUE_ROWS]
    title = "ClusterQueues" + (
        f" (the {len(shown)} with the longest mean wait of {len(names)})" if len(names) > len(shown) else ""
    )
    table = Table(title=title, title_justify="left")
    for column in (
        "ClusterQueue",
        "jobs",
        "use % nominal",
        "avg borrowed",
        "mean wait s",
        "p90 wait s",
        "preempted",
        f"lost {primary}-h",
    ):
        table.add_column(column, justify="left" if column == "ClusterQueue" else "right")
    for name in shown:
        q = queues[name]
        table.add_row(
            name,
            _fmt(q["jobs"]),
            _fmt(q["averageUsagePercentOfNominal"]),
            _fmt(q["averageBorrowed"]),
            _fmt(q["wait"].get("mean")),
            _fmt(q["wait"].get("p90")),
            _fmt(q["preemptions"]),
            _fmt(q["lostResourceHours"].get(primary, 0.0)),
        )
    return table
