"""`pykueue report usage|efficiency`: cost, usage, lost work and quota efficiency per tenant.

The numbers come from one document (`api.usage.document`): the standalone server serves
it at ``/api/v1/usage`` from its ledger; with ``--kubeconfig`` it is built here from the
Workloads, ResourceFlavors and ClusterQueues in the cluster. Everything else is the pure
arithmetic of `pykueue.api.usage`. Like `get` and `describe` (cli/queries.py), the
standalone path imports neither typer nor pydantic.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from pykueue.api import usage
from pykueue.errors import PykueueError

REPORTS = ("usage", "efficiency")
FORMATS = ("table", "csv", "json")
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:d|h|m|s))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class ReportError(ValueError):
    pass


def moment(text: str, now: float, flag: str) -> float:
    """``--since``/``--until``: a duration back from now (``24h``, ``7d``, ``1h30m``) or a time."""
    value = text.strip()
    if _DURATION.match(value):
        return now - sum(float(n) * _SECONDS[u] for n, u in _PART.findall(value))
    seconds = usage.parse_time(value)
    if seconds is None:
        raise ReportError(
            f"{flag} {text!r}: expected a duration back from now (24h, 7d, 1h30m) "
            "or a time (2026-12-01 or 2026-12-01T09:00:00Z)"
        )
    return seconds


def window(since: str, until: str | None, now: float) -> tuple[float, float]:
    start = moment(since, now, "--since")
    end = now if until is None else moment(until, now, "--until")
    if end <= start:
        raise ReportError(f"--since ({_iso(start)}) must come before --until ({_iso(end)})")
    return start, min(end, now)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ sources


def from_server(server: str | None, token: str | None, socket: str | None, since: float, until: float) -> Any:
    from pykueue.cli.client import call, client

    api = client(server, token, socket)
    return call(lambda: api.get("/api/v1/usage", since=repr(since), until=repr(until)))


def from_cluster(kubeconfig: str, context: str | None, since: float, until: float) -> dict[str, Any]:
    """The document built from the cluster's objects: the run each Workload still shows."""
    import asyncio

    from pykueue.store import kubernetes

    async def read() -> dict[str, Any]:
        store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(kubeconfig, context))
        try:
            workloads, _ = await store.list("Workload")
            flavors, _ = await store.list("ResourceFlavor")
            queues, _ = await store.list("ClusterQueue")
            try:
                jobs, _ = await store.list("Job")
            except PykueueError:
                jobs = []  # not allowed to list Jobs: no run-time check, the rest stands
        finally:
            await store.close()
        runs = [
            r for r in map(usage.current_run, workloads) if r is not None and usage.overlaps(r, since, until)
        ]
        return usage.document(runs, flavors, queues, usage.job_durations(jobs), since, until, "kubernetes")

    try:
        return asyncio.run(read())
    except (OSError, PykueueError) as exc:
        raise ReportError(f"cannot read the cluster of {kubeconfig}: {exc}") from None


# ------------------------------------------------------------------ output


def _hours(value: float) -> str:
    return f"{value:.2f}"


def usage_report(doc: dict[str, Any], by: str, fmt: str) -> None:
    since, until = float(doc["since"]), float(doc["until"])
    runs = [usage.Run.from_json(r) for r in doc["runs"]]
    rows = usage.usage(runs, doc.get("prices") or {}, since, until, by)
    checks = usage.reconcile(runs, doc.get("ran") or {}, since)
    resources = sorted({r for row in rows for r in row.hours})
    if fmt == "json":
        print(
            json.dumps(
                {
                    "since": _iso(since),
                    "until": _iso(until),
                    "by": by,
                    "rows": [row.to_json() for row in rows],
                    "checks": [c.to_json() for c in checks],
                },
                indent=2,
            )
        )
        return
    header = [
        by,
        "runs",
        *[f"{_unit(r)}-h" for r in resources],
        "cost",
        *[f"lost {_unit(r)}-h" for r in resources],
        "lost cost",
        "preempted",
    ]
    table = [
        [
            row.group,
            str(row.runs),
            *[_hours(row.hours.get(r, 0.0)) for r in resources],
            f"{row.cost:.2f}",
            *[_hours(row.lost_hours.get(r, 0.0)) for r in resources],
            f"{row.lost_cost:.2f}",
            str(row.preempted),
        ]
        for row in rows
    ]
    if not _emit(
        fmt, f"Usage from {_iso(since)} to {_iso(until)} by {by} ({doc.get('source')})", header, table
    ):
        return
    unpriced = sorted({u for row in rows for u in row.unpriced})
    if unpriced:
        print(
            f"No price (counted as 0): {', '.join(unpriced)} (annotation {usage.PRICE} on the ResourceFlavor)"
        )
    if checks:
        bad = [c for c in checks if not c.ok]
        held = sum(c.held_seconds for c in checks) / 3600
        ran = sum(c.ran_seconds for c in checks) / 3600
        print(
            f"Checked {len(checks)} job(s) against their run time: quota held {held:.3f} h, "
            f"{'processes' if doc.get('source') == 'standalone' else 'Jobs'} ran {ran:.3f} h; "
            + ("all within tolerance" if not bad else f"{len(bad)} differ:")
        )
        for c in bad:
            print(f"  {c.namespace}/{c.owner}: held {c.held_seconds:.0f} s, ran {c.ran_seconds:.0f} s")


def efficiency_report(doc: dict[str, Any], fmt: str) -> None:
    since, until = float(doc["since"]), float(doc["until"])
    runs = [usage.Run.from_json(r) for r in doc["runs"]]
    queues = [usage.Queue.from_json(q) for q in doc.get("queues") or []]
    rows = usage.efficiency(runs, queues, since, until)
    if fmt == "json":
        print(
            json.dumps(
                {"since": _iso(since), "until": _iso(until), "rows": [r.to_json() for r in rows]}, indent=2
            )
        )
        return
    header = ["clusterqueue", "flavor", "resource", "nominal", "used", "borrowed", "lent", "used/nominal"]
    table = [
        [
            r.cluster_queue,
            r.flavor,
            f"{r.resource}" + (" (GiB)" if usage.is_bytes(r.resource) else ""),
            f"{r.nominal:.2f}",
            f"{r.used:.2f}",
            f"{r.borrowed:.2f}",
            f"{r.lent:.2f}",
            "" if r.utilisation is None else f"{r.utilisation:.0%}",
        ]
        for r in rows
    ]
    title = f"Quota efficiency from {_iso(since)} to {_iso(until)} (time averages, {doc.get('source')})"
    _emit(fmt, title, header, table)


def _unit(resource: str) -> str:
    return f"{resource}(GiB)" if usage.is_bytes(resource) else resource


def _emit(fmt: str, title: str, header: list[str], table: list[list[str]]) -> bool:
    """The rows as CSV, or under a title as a table; True for a table (the caller may add footers)."""
    if fmt == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(header)
        out.writerows(table)
        return False
    print(title)
    _table(table, header)
    return True


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


# ------------------------------------------------------------------ the command


def run(
    what: str,
    since: str = "24h",
    until: str | None = None,
    by: str = "namespace",
    output: str = "table",
    kubeconfig: str | None = None,
    context: str | None = None,
    server: str | None = None,
    token: str | None = None,
    socket: str | None = None,
) -> None:
    from pykueue.cli.client import fail

    try:
        if what not in REPORTS:
            raise ReportError(f"no report {what!r}: choose one of {', '.join(REPORTS)}")
        if by not in usage.GROUPINGS:
            raise ReportError(f"--by {by!r}: choose one of {', '.join(usage.GROUPINGS)}")
        if output not in FORMATS:
            raise ReportError(f"--format {output!r}: choose one of {', '.join(FORMATS)}")
        start, end = window(since, until, time.time())
        if kubeconfig:
            doc = from_cluster(kubeconfig, context, start, end)
        else:
            doc = from_server(server, token, socket, start, end)
    except ReportError as exc:
        fail(str(exc))
    if what == "usage":
        usage_report(doc, by, output)
    else:
        efficiency_report(doc, output)
