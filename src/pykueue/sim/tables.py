"""The rich terminal tables: a run's headline figures, upstream's checker figures, the queues."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from pykueue.sim import policies
from pykueue.sim.checker import Verdict
from pykueue.sim.report_html import Duration, headline_rows, human_duration, human_rows

MAX_QUEUE_ROWS = 20


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Duration):
        return human_duration(value)
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _human(seconds: float | None) -> str:
    return human_duration(seconds)


def _short(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def summary_table(summary: dict[str, Any]) -> Table:
    table = Table(title=f"simulation of {summary['design']}", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in human_rows(headline_rows(summary)):
        table.add_row(name, _fmt(value))
    return table


def policies_table(summary: dict[str, Any]) -> Table:
    """The aging and preemption contracts in force per ClusterQueue, and the site default."""
    section = summary.get("policies", {})
    table = Table(
        title=f"policies in force (site default preemption contract: {section.get('siteDefaultContract', 'none')})",
        title_justify="left",
    )
    table.add_column("ClusterQueue", no_wrap=True)
    table.add_column("policy", no_wrap=True)
    table.add_column("in force")
    for row in policies.lines(section):
        table.add_row(*row)
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
    longest = max((len(name) for name in shown), default=12)
    table.add_column("ClusterQueue", no_wrap=True, min_width=min(24, longest))
    unit = "GPU-h" if "gpu" in primary.lower() else f"{primary}-h"
    for column in (
        "jobs",
        f"{unit}\nrecv",
        "bor-\nrowed",
        "p90\nwait",
        "p90\ndelay",
        "pre-\nempted",
        f"lost\n{unit}",
    ):
        table.add_column(column, justify="right", no_wrap=True)
    for name in shown:
        q = queues[name]
        table.add_row(
            name,
            _fmt(q["jobs"]),
            _short(q["usedPrimaryHours"]),
            _fmt(q["averageBorrowed"]),
            _human(q["wait"].get("p90")),
            _human(q["completionDelay"].get("p90")),
            _fmt(q["preemptions"]),
            _fmt(q["lostResourceHours"].get(primary, 0.0)),
        )
    return table


def verdicts_table(verdicts: list[Verdict], source: str) -> Table:
    table = Table(title=f"upstream checker rules of {source}", title_justify="left")
    for column in ("rule", "limit", "simulated", ""):
        table.add_column(column, justify="left" if column == "rule" else "right")
    for verdict in verdicts:
        mark = "[green]ok[/green]" if verdict.ok else "[red]FAIL[/red]"
        table.add_row(verdict.rule, verdict.limit, verdict.actual, mark)
    return table


def clusters_table(summary: dict[str, Any]) -> Table:
    """A MultiKueue run: each cluster's jobs and copies, use of its quota per flavor (waits per worker: the JSON)."""
    section = summary["multiKueue"]
    table = Table(
        title=f"clusters ({section['dispatcher']} dispatch; mean wait at the manager "
        f"{_human(section['managerWait'].get('mean'))}, for a worker {_human(section['workerWait'].get('mean'))})",
        title_justify="left",
        pad_edge=False,
    )
    table.add_column("cluster", no_wrap=True)
    for column in ("jobs", "copies/\nwith-\ndrawn", "pre-\nempted"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("flavor/resource", no_wrap=True)
    for column in ("cap.", "%\nused"):
        table.add_column(column, justify="right", no_wrap=True)
    rows = [(summary["design"], section["manager"]), *section["workers"].items()]
    for name, cluster in rows:
        copies = f"{cluster['copies']:,}/{cluster['copiesWithdrawn']:,}" if "copies" in cluster else "-"
        usage = list(cluster["usage"].items()) or [("-", {})]
        for k, (fr, figures) in enumerate(usage):
            first = k == 0
            table.add_row(
                name if first else "",
                _fmt(cluster["finished"]) if first else "",
                copies if first else "",
                _fmt(cluster["preemptions"]) if first else "",
                fr,
                f"{figures['capacity']:g}" if figures else "-",
                _short(figures.get("percentOfCapacity")),
            )
    return table
