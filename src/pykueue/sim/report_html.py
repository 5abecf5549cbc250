"""The HTML report of one run: a single self-contained file with inline SVG charts.

No script, no stylesheet or font from the network: the file opens offline and
can be mailed. With many ClusterQueues the time charts group them (by cohort,
or the busiest ones and "others"), since a chart with a thousand lines says
nothing; the tables keep every queue.
"""

from __future__ import annotations

from html import escape
from typing import Any

from pykueue.sim import policies, svg
from pykueue.sim.driver import Run
from pykueue.sim.jobs import SECOND
from pykueue.sim.metrics import Recorder

MAX_LINES = 12
MAX_BARS = 60
MAX_MATRIX = 12  # teams per side of the victim x preemptor table; beyond, a list of pairs

PAGE_STYLE = """
body{font-family:sans-serif;margin:24px auto;padding:0 12px;color:#222;max-width:1100px}
@media (max-width:700px){body{margin:8px auto}}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:13px} .wide{overflow-x:auto;max-width:100%} .worse{background:#fbe3c8} .better{background:#d4e8f7} .noise{color:#666}
"""


def human_duration(seconds: float | None) -> str:
    """Seconds in the unit a reader thinks in: 45 s, 12.5 min, 8.4 h, 3.2 d."""
    if seconds is None:
        return "-"
    value = abs(seconds)
    sign = "-" if seconds < 0 else ""
    if value < 90:
        return f"{sign}{value:.3g} s"
    if value < 90 * 60:
        return f"{sign}{value / 60:.3g} min"
    if value < 48 * 3600:
        return f"{sign}{value / 3600:.3g} h"
    return f"{sign}{value / 86400:.3g} d"


class Duration(float):
    """A number of seconds that tables show in human units (the JSON keeps seconds)."""


def groups(rec: Recorder) -> list[tuple[str, list[str]]]:
    """ClusterQueues for the time charts: each one, or by cohort, or the busiest and the rest."""
    names = list(rec.queues)
    if len(names) <= MAX_LINES:
        return [(name, [name]) for name in names]
    by_cohort: dict[str, list[str]] = {}
    for name in names:
        by_cohort.setdefault(rec.queues[name].cohort or "(no cohort)", []).append(name)
    if len(by_cohort) <= MAX_LINES:
        return [(f"cohort {cohort} ({len(members)} CQs)", members) for cohort, members in by_cohort.items()]
    busiest = sorted(names, key=lambda n: (-sum(rec.queues[n].integral.values()), n))
    top = busiest[: MAX_LINES - 1]
    rest = busiest[MAX_LINES - 1 :]
    return [*((name, [name]) for name in top), (f"{len(rest)} others", rest)]


def table_html(header: list[str], rows: list[list[Any]], classes: list[list[str]] | None = None) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = []
    for r, row in enumerate(rows):
        cells = []
        for c, cell in enumerate(row):
            css = classes[r][c] if classes else ""
            attr = f' class="{css}"' if css else ""
            cells.append(f"<td{attr}>{escape(_fmt(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='wide'><table><tr>{head}</tr>{''.join(body)}</table></div>"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Duration):
        return human_duration(value)
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items()) or "-"
    return str(value)


def page(title: str, sections: list[str]) -> str:
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{PAGE_STYLE}{svg.STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{''.join(sections)}</body></html>\n"
    )


def render(run: Run, summary: dict[str, Any]) -> str:
    return page(f"pykueue simulation: {summary['design']}", sections(run, summary))


def headline_rows(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The figures both the run report and the plan comparison lead with."""
    totals = summary["totals"]
    primary = totals["primaryResource"]
    wait = totals["wait"]
    rows: list[tuple[str, Any]] = [
        ("jobs", totals["jobs"]),
        ("finished", totals["finished"]),
        ("makespan (s)", totals["makespanSeconds"]),
        ("ideal makespan (s)", summary["ideal"]["makespanSeconds"]),
        (f"utilisation of nominal {primary} (%)", totals["utilisationPercent"].get(primary)),
        ("mean wait (s)", wait.get("mean")),
        ("p50 wait (s)", wait.get("p50")),
        ("p90 wait (s)", wait.get("p90")),
        ("max wait (s)", wait.get("max")),
        ("mean time to last admission (s)", totals["timeToLastAdmission"].get("mean")),
        ("p90 time to last admission (s)", totals["timeToLastAdmission"].get("p90")),
        ("mean completion delay (s)", totals["completionDelay"].get("mean")),
        ("p90 completion delay (s)", totals["completionDelay"].get("p90")),
        ("preemptions", totals["preemptions"]),
        (f"lost {primary}-hours", totals["lostResourceHours"].get(primary, 0.0)),
        *(
            [
                ("stopped at their maximum execution time", totals["exceededMaximumExecutionTime"]),
                (f"{primary}-hours of those jobs", totals["exceededResourceHours"].get(primary, 0.0)),
            ]
            if totals.get("exceededMaximumExecutionTime")
            else []
        ),
        ("fairness (mean Jain index)", summary["fairness"]["mean"]),
        ("fairness (min Jain index)", summary["fairness"]["min"]),
    ]
    federated = summary.get("multiKueue")
    if federated is not None:
        rows += [
            (f"utilisation of the workers' {primary} (%)", federated["workersPrimaryPercentOfCapacity"]),
            ("mean wait at the manager (s)", federated["managerWait"].get("mean")),
            ("mean wait for a worker (s)", federated["workerWait"].get("mean")),
            ("p90 wait for a worker (s)", federated["workerWait"].get("p90")),
        ]
    return rows


def human_rows(rows: list[tuple[str, Any]]) -> list[list[Any]]:
    """Headline rows with their durations in human units (the label loses its "(s)")."""
    return [
        [figure.removesuffix(" (s)"), dur(value)] if figure.endswith(" (s)") else [figure, value]
        for figure, value in rows
    ]


def policies_html(summary: dict[str, Any]) -> str:
    """The aging and preemption contracts the run obeyed (docs/governance.md)."""
    rows = [list(row) for row in policies.lines(summary.get("policies", {}))]
    default = summary.get("policies", {}).get("siteDefaultContract", "none")
    note = f"<p class='note'>Site default preemption contract: {escape(default)}.</p>"
    return "<h2>Policies in force</h2>" + note + table_html(["ClusterQueue", "policy", "in force"], rows)


def sections(run: Run, summary: dict[str, Any]) -> list[str]:
    rec = run.recorder
    primary = rec.primary
    out = [
        f"<p class='note'>input {escape(str(summary['input']))}, seed {summary['seed']}. "
        f"{escape(summary['model']['cycles'])}.</p>"
    ]
    for note in summary["notes"]:
        out.append(f"<p class='note'>note: {escape(note)}</p>")
    out.append("<h2>Summary</h2>" + table_html(["figure", "value"], human_rows(headline_rows(summary))))
    out.append(policies_html(summary))
    out.append(_checker(summary))
    grid = rec.grid()
    x = [t / SECOND for t in grid]
    chosen = groups(rec)
    pending = []
    usage = []
    for label, members in chosen:
        columns = [rec.on_grid(rec.queues[m], rec.queues[m].pending, grid) for m in members]
        pending.append((label, [float(sum(values)) for values in zip(*columns, strict=True)]))
        used = [rec.on_grid(rec.queues[m], rec.queues[m].used, grid) for m in members]
        usage.append((label, [sum(values) / 1000 for values in zip(*used, strict=True)]))
    nominal = (
        sum(series.nominal.get(primary, 0) for series in rec.queues.values())
        + rec.cohort_nominal.get(primary, 0)
    ) / 1000
    out.append("<h2>Queue lengths over time</h2>")
    out.append(svg.line_chart("pending workloads", x, pending, "time", "pending", time_axis=True))
    out.append(f"<h2>Usage over time ({escape(primary)} in use per team)</h2>")
    out.append(
        "<p class='note'>Absolute amounts stacked per ClusterQueue (a queue with no nominal quota "
        "shows what it borrows); the dashed line is the total nominal quota.</p>"
    )
    out.append(
        svg.stacked_chart(
            f"{primary} in use, stacked per ClusterQueue",
            x,
            usage,
            "time",
            primary,
            time_axis=True,
            line=(f"total nominal {primary}: {nominal:g}", nominal),
        )
    )
    out.append(_borrowing(rec, summary))
    out.append(_waits(rec, summary))
    out.append(_losses(summary, primary))
    fairness = rec.fairness(grid)
    out.append("<h2>Fairness over time</h2>")
    out.append(
        "<p class='note'>Jain's index of usage divided by entitlement (nominal quota x fair-sharing weight) "
        "over the ClusterQueues that have pending work: 1 is perfectly even, 1/n is one queue taking all.</p>"
    )
    out.append(
        svg.line_chart(
            "Jain's index", x, [("fairness", fairness)], "time", "index", y_max=1.0, time_axis=True
        )
    )
    out.append(_queue_table(summary, primary))
    if run.clusters is not None:
        out.append(_clusters(run, summary, x, grid))
    return out


def _clusters(run: Run, summary: dict[str, Any], x: list[float], grid: list[int]) -> str:
    """A MultiKueue run: each cluster's use of its quota over time and in total, jobs and waits."""
    assert run.clusters is not None
    section = summary["multiKueue"]
    primary = summary["totals"]["primaryResource"]
    lines = []
    for record in run.clusters.records():
        capacity = sum(v for (_, r), v in record.capacity.items() if r == primary)
        if not capacity:
            continue
        values = _on_grid(record.times, record.primary_in_use, grid)
        lines.append((record.name, [100 * v / capacity for v in values]))
    chart = svg.line_chart(
        f"{primary} in use, % of each cluster's nominal quota",
        x,
        lines,
        "time",
        "%",
        y_max=100.0,
        time_axis=True,
    )
    header = [
        "cluster",
        "role",
        "jobs run",
        "copies",
        "withdrawn",
        "preempted",
        "lost to timeout",
        "flavor/resource",
        "capacity",
        "average in use",
        "resource-hours",
        "% of capacity",
        "p90 worker wait",
    ]
    rows: list[list[Any]] = []
    for name, cluster in [(summary["design"], section["manager"]), *section["workers"].items()]:
        wait = cluster.get("workerWait", {}).get("p90")
        for k, (fr, figures) in enumerate(cluster["usage"].items() or [("-", {})]):
            head: list[Any] = (
                [
                    name,
                    cluster["role"],
                    cluster["finished"],
                    cluster.get("copies", "-"),
                    cluster.get("copiesWithdrawn", "-"),
                    cluster["preemptions"],
                    cluster.get("lostToTimeout", "-"),
                ]
                if k == 0
                else ["", "", "", "", "", "", ""]
            )
            wait_cell = dur(wait) if k == 0 and "workerWait" in cluster else ""
            rows.append(
                [
                    *head,
                    fr,
                    figures.get("capacity"),
                    figures.get("averageInUse"),
                    figures.get("usedResourceHours"),
                    figures.get("percentOfCapacity"),
                    wait_cell,
                ]
            )
    note = (
        f"<p class='note'>{escape(section['dispatcher'])} dispatch, copies arrive "
        f"{section['dispatchLatencySeconds']:g} s after the manager's reservation. Mean wait at the manager "
        f"{escape(human_duration(section['managerWait'].get('mean')))}, for a worker "
        f"{escape(human_duration(section['workerWait'].get('mean')))}. The manager's use is what it reserves "
        "(from its reservation, while the workers race, until the job ends); a worker's counts its copies "
        "while they hold quota, losing ones included until they are withdrawn.</p>"
    )
    if section["outages"]:
        windows = ", ".join(
            f"{o['worker']} from {human_duration(o['startSeconds'])} to {human_duration(o['endSeconds'])}"
            for o in section["outages"]
        )
        note += (
            f"<p class='note'>Out of the manager's reach: {escape(windows)}. A job that won on such a worker "
            f"went back to the manager's queue after workerLostTimeout "
            f'({escape(human_duration(section["workerLostTimeoutSeconds"]))}): "lost to timeout".</p>'
        )
    return f"<h2>Clusters (MultiKueue)</h2>{note}{chart}{table_html(header, rows)}"


def _on_grid(times: list[int], values: list[int], grid: list[int]) -> list[int]:
    """Piecewise-constant ``values`` changing at ``times``, read at each grid time."""
    result = []
    position = 0
    last = len(times) - 1
    for moment in grid:
        while position < last and times[position + 1] <= moment:
            position += 1
        result.append(values[position])
    return result


def _checker(summary: dict[str, Any]) -> str:
    checker = summary["checker"]
    rows: list[list[Any]] = [["wall (virtual) time (ms)", checker["cmd"]["wallMs"]]]
    for cls, values in checker["clusterQueueClasses"].items():
        rows.append([f"ClusterQueue class {cls}: usage (%)", values["usagePercent"]])
    for cls, values in checker["workloadClasses"].items():
        rows.append(
            [f"workload class {cls}: average time to admission (ms)", values["averageTimeToAdmissionMs"]]
        )
    return (
        "<h2>Upstream checker figures</h2><p class='note'>As upstream's scheduler-performance recorder "
        "computes them (rangespec.yaml's cmd.maxWallMs, clusterQueueClassesMinUsage, "
        "wlClassesMaxAvgTimeToAdmissionMs).</p>" + table_html(["figure", "value"], rows)
    )


def _borrowing(rec: Recorder, summary: dict[str, Any]) -> str:
    primary = rec.primary
    names = sorted(rec.queues, key=lambda n: (-sum(rec.queues[n].integral.values()), n))[:MAX_BARS]
    end = rec.end or 1
    within, borrowed, nominal = [], [], []
    for name in names:
        series = rec.queues[name]
        average = series.integral.get(primary, 0) / end / 1000
        lent = series.borrowed_integral / end / 1000
        within.append(round(average - lent, 3))
        borrowed.append(round(lent, 3))
        nominal.append(series.nominal.get(primary, 0) / 1000)
    chart = svg.bar_chart(
        f"average {primary} in use per ClusterQueue",
        names,
        [("within nominal", within), ("borrowed", borrowed)],
        primary,
        stacked=True,
        markers=nominal,
        marker_label="nominal quota",
    )
    more = f" (the {MAX_BARS} busiest)" if len(rec.queues) > MAX_BARS else ""
    return f"<h2>Borrowed vs nominal use{more}</h2>{chart}"


def _waits(rec: Recorder, summary: dict[str, Any]) -> str:
    by_class: dict[str, list[float]] = {}
    for i, job in enumerate(rec.jobs):
        if rec.first_admit[i] >= 0:
            by_class.setdefault(job.job_class, []).append((rec.first_admit[i] - job.submit) / SECOND)
    series = [(cls, sorted(values)) for cls, values in sorted(by_class.items())][:MAX_LINES]
    cdf = svg.cdf_chart("wait from submission to first admission, per class", series, "wait", log_x=True)
    queues = summary["clusterQueues"]
    names = sorted(queues, key=lambda n: (-(queues[n]["wait"].get("p90") or 0), n))[:MAX_BARS]
    bars = svg.bar_chart(
        "wait per ClusterQueue (p50, p90)",
        names,
        [
            ("p50", [queues[n]["wait"].get("p50", 0.0) for n in names]),
            ("p90", [queues[n]["wait"].get("p90", 0.0) for n in names]),
        ],
        "wait",
        duration_axis=True,
    )
    rows = [
        [
            cls,
            v["jobs"],
            dur(v["wait"].get("mean")),
            dur(v["wait"].get("p50")),
            dur(v["wait"].get("p90")),
            dur(v["wait"].get("max")),
            dur(v["timeToLastAdmission"].get("p90")),
            dur(v["timeToLastAdmission"].get("max")),
            dur(v["completionDelay"].get("p90")),
            dur(v["completionDelay"].get("max")),
        ]
        for cls, v in summary["classes"].items()
    ]
    table = table_html(
        [
            "class",
            "jobs",
            "mean wait",
            "p50 wait",
            "p90 wait",
            "max wait",
            "p90 to last admission",
            "max to last admission",
            "p90 completion delay",
            "max completion delay",
        ],
        rows,
    )
    note = (
        "<p class='note'>A <b>wait</b> is from submission to the first admission. The <b>time to last "
        "admission</b> runs to the last admission, so it also counts the waits after preemptions "
        "(upstream's time to admission, above). The <b>completion delay</b> is how much later than "
        "submission + runtime a job finished: waits, plus work redone after preemptions.</p>"
    )
    return f"<h2>Wait-time distributions</h2>{note}{cdf}{table}{bars}"


def _losses(summary: dict[str, Any], primary: str) -> str:
    queues = summary["clusterQueues"]
    hit = [n for n in queues if queues[n]["preemptions"]]
    if not hit:
        return "<h2>Preemptions and lost work</h2><p>No preemptions.</p>"
    names = sorted(hit, key=lambda n: (-queues[n]["preemptions"], n))[:MAX_BARS]
    unit = "GPU-hours" if "gpu" in primary.lower() else f"{primary}-hours"
    preemptions = svg.bar_chart(
        "preemptions per tenant (ClusterQueue)",
        names,
        [("preemptions", [float(queues[n]["preemptions"]) for n in names])],
        "count",
    )
    lost = svg.bar_chart(
        f"lost {unit} per tenant",
        names,
        [(f"lost {unit}", [queues[n]["lostResourceHours"].get(primary, 0.0) for n in names])],
        unit,
    )
    return f"<h2>Preemptions and lost work</h2>{preemptions}{lost}{preemption_matrix(summary, unit)}"


def preemption_matrix(summary: dict[str, Any], unit: str) -> str:
    """Victim x preemptor per team (ClusterQueue): how often, why, and the work it cost."""
    cells = summary["preemptionsByPreemptor"]
    if not cells:
        return ""
    victims = sorted({c["victim"] for c in cells})
    preemptors = sorted({c["preemptor"] for c in cells})
    note = (
        "<p class='note'>Rows are the teams (ClusterQueues) whose jobs were preempted, columns the teams "
        f"whose jobs preempted them; each cell: preemptions, {escape(unit)} lost, upstream's reasons "
        "(InClusterQueue: a higher priority job of the same queue; InCohortReclamation: the owner took "
        "back quota lent out; InCohortReclaimWhileBorrowing: a borrower with higher priority; "
        "InCohortFairSharing: fair sharing).</p>"
    )
    if len(victims) > MAX_MATRIX or len(preemptors) > MAX_MATRIX:
        rows = [
            [c["victim"], c["preemptor"], c["count"], c["lostResourceHours"], _reasons(c["reasons"])]
            for c in sorted(cells, key=lambda c: (-c["count"], c["victim"], c["preemptor"]))[:200]
        ]
        table = table_html(["victim", "preemptor", "preemptions", f"lost {unit}", "reasons"], rows)
        return f"<h3>Who preempted whom</h3>{note}{table}"
    by_pair = {(c["victim"], c["preemptor"]): c for c in cells}
    rows = []
    for victim in victims:
        row: list[Any] = [victim]
        for preemptor in preemptors:
            cell = by_pair.get((victim, preemptor))
            row.append(
                f"{cell['count']} ({cell['lostResourceHours']:g} {unit}; {_reasons(cell['reasons'])})"
                if cell
                else ""
            )
        rows.append(row)
    table = table_html(["victim \\ preemptor", *preemptors], rows)
    return f"<h3>Who preempted whom</h3>{note}{table}"


def _reasons(reasons: dict[str, int]) -> str:
    return ", ".join(f"{reason or '?'} {count}" for reason, count in reasons.items())


def _queue_table(summary: dict[str, Any], primary: str) -> str:
    header, rows = queue_rows(summary, primary)
    return (
        "<h2>ClusterQueues (teams)</h2><p class='note'>Received is the "
        f"{escape(primary)}-hours the queue's jobs held; entitled its nominal quota x the makespan; "
        "both in absolute units, so designs with different quotas compare. Preemptions suffered are its "
        "jobs', caused are those its jobs made (in any queue).</p>" + table_html(header, rows)
    )


def queue_rows(summary: dict[str, Any], primary: str) -> tuple[list[str], list[list[Any]]]:
    """The per-team table of the report (and of each design in a plan)."""
    unit = unit_of(primary)
    rows = []
    for name, q in summary["clusterQueues"].items():
        received = q["usedPrimaryHours"]
        entitled = q["entitledPrimaryHours"]
        rows.append(
            [
                name,
                q["cohort"] or "-",
                q["jobs"],
                q["finished"],
                q["nominal"].get(primary, 0.0),
                received,
                entitled,
                q["demandPrimaryHours"],
                q["averageBorrowed"],
                q["maxPending"],
                dur(q["wait"].get("mean")),
                dur(q["wait"].get("p90")),
                dur(q["timeToLastAdmission"].get("p90")),
                dur(q["completionDelay"].get("p90")),
                q["preemptions"],
                q["preemptionsCaused"],
                q["lostResourceHours"].get(primary, 0.0),
            ]
        )
    header = [
        "ClusterQueue",
        "cohort",
        "jobs",
        "finished",
        f"nominal {primary}",
        f"{unit} received",
        f"{unit} entitled",
        f"{unit} demanded",
        "avg borrowed",
        "max pending",
        "mean wait",
        "p90 wait",
        "p90 to last admission",
        "p90 completion delay",
        "preemptions suffered",
        "preemptions caused",
        f"lost {unit}",
    ]
    return header, rows


def unit_of(primary: str) -> str:
    return "GPU-h" if "gpu" in primary.lower() else f"{primary}-h"


def dur(seconds: float | None) -> Duration | None:
    return None if seconds is None else Duration(seconds)
