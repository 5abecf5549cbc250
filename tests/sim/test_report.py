"""The run report's charts: human time units, log-scale waits, absolute stacked usage, nominal-0 queues."""

from __future__ import annotations

import re

from pykueue.sim import report_html, svg

from .helpers import cluster_queue, design, run

HEADER = "name,submit,queue,runtime,requests\n"


def charts(html: str) -> list[str]:
    return re.findall(r'<figure class="chart">.*?</figure>', html, re.S)


def test_a_queue_with_no_nominal_quota_is_in_every_team_chart_and_long_traces_count_days():
    # idle lends its 4 CPUs; borrower (nominal 0) runs on them for five days
    trace = HEADER + "long,0,borrower/main,120h,cpu=4\nshort,60,idle/main,10,cpu=1\n"
    result = run(
        design(cluster_queue("idle", "4", cohort="c"), cluster_queue("borrower", "0", cohort="c")), trace
    )
    summary = result.summary("trace.csv")
    html = report_html.render(result, summary)
    (stacked,) = [c for c in charts(html) if "stacked per ClusterQueue" in c]
    legend = re.search(r'<ul class="legend">(.*?)</ul>', stacked, re.S)
    assert legend is not None
    assert "borrower" in legend.group(1) and "idle" in legend.group(1)
    assert "total nominal cpu: 4" in legend.group(1)
    # the borrower's area is drawn (non-zero height somewhere), not dropped as "no nominal"
    polygons = re.findall(r'<polygon[^>]*points="([^"]*)"><title>borrower</title>', stacked)
    assert polygons and len({p.split(",")[1] for p in polygons[0].split()}) > 1
    assert "time (days)" in html
    assert "log scale" in html
    # 4 CPUs x 120 h, plus the minute thrown away when idle reclaimed a CPU at 60 s
    assert summary["clusterQueues"]["borrower"]["usedPrimaryHours"] == round(4 * (120 + 1 / 60), 4)
    rows = re.findall(r"<tr><td>borrower</td>.*?</tr>", html)
    assert any("<td>480.07</td>" in row for row in rows)  # received, in absolute units


def test_human_units_and_time_axes():
    assert report_html.human_duration(54) == "54 s"
    assert report_html.human_duration(8.4 * 3600) == "8.4 h"
    assert report_html.human_duration(3 * 86400) == "3 d"
    assert report_html.human_duration(750) == "12.5 min"
    assert svg.time_unit(3 * 86400) == (86400.0, "days")
    assert svg.time_unit(5 * 3600) == (3600.0, "hours")
    assert svg.time_unit(100) == (1.0, "seconds")
    chart = svg.cdf_chart("waits", [("a", [0.0, 5.0, 7200.0])], "wait", log_x=True)
    for tick in ("1 s", "10 s", "1 min", "1 h"):
        assert f">{tick}</text>" in chart
