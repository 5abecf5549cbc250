"""Small inline-SVG charts: line, stacked-area and bar charts and CDFs, with no plotting library.

Each function returns one chart as HTML: a ``<figure class="chart">`` holding
the ``<svg>`` plot (axes, ticks, title; its ``viewBox`` lets it scale with the
page) and the legend as an HTML list beside it. The page's style puts the
legend to the right of the plot on a wide screen and below it on a narrow one
(a phone), so it is never off screen. Colours come from one fixed palette
(colour-blind-safe Okabe-Ito first), series beyond it cycle.

Each chart is drawn twice, for two layouts, and the page's style shows one: the
wide drawing (640 x 260 user units) where the plot gets at least ~580 px, the
narrow one (320 x 240, fewer ticks, shorter category labels) below that, i.e.
on a phone. Text is 11 user units either way, so on a phone (the narrow drawing
at 320-640 px) a label is 11-22 px and at a desktop's 720 px about 12 px;
scaling the wide drawing down to a phone's 420 px would make it about 7 px.

Time axes (``time_axis``) take seconds and show them in the unit that suits
the span: seconds, minutes, hours or days. Wait CDFs may use a log scale
(``log_x``), with human ticks (1 s, 10 s, 1 min, 10 min, 1 h, ...).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
    "#8c564b",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


@dataclass(frozen=True, slots=True)
class Layout:
    """One drawing of a chart: its size and margins (user units) and how many labels fit."""

    name: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_ticks: int  # about how many ticks a linear x axis gets
    log_stride: int  # every n-th tick of a log axis
    label_chars: int  # category labels of bar charts, rotated below the axis, are cut to this
    label_space: int  # units below the plot they need
    max_labels: int  # at most this many category labels (every n-th category beyond)
    title_x: int  # where the title starts
    title_chars: int  # a longer title wraps (bold 13 units: about 7.5 units a character)


WIDE = Layout("wide", 640, 260, 60, 16, 38, 34, 5, 1, 20, 90, 24, 60, 76)
NARROW = Layout("narrow", 320, 250, 46, 10, 44, 36, 3, 2, 11, 66, 10, 4, 40)
LAYOUTS = (WIDE, NARROW)
WIDTH, HEIGHT = WIDE.width, WIDE.height
MAX_LEGEND = 24
# (seconds, label) for log-scale duration axes
LOG_TICKS = (
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3600, "1 h"),
    (36000, "10 h"),
    (86400, "1 d"),
    (864000, "10 d"),
    (8640000, "100 d"),
)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def time_unit(span_seconds: float) -> tuple[float, str]:
    """(seconds per unit, unit) for an axis spanning ``span_seconds``."""
    if span_seconds > 2 * 86400:
        return 86400.0, "days"
    if span_seconds > 2 * 3600:
        return 3600.0, "hours"
    if span_seconds > 2 * 60:
        return 60.0, "minutes"
    return 1.0, "seconds"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw), default=raw)
    start = math.floor(low / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < high - step * 1e-9:
        ticks.append(round(start + step * len(ticks), 10))
    return ticks


def _label(value: float) -> str:
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if abs(value) >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _frame(
    g: Layout,
    title: str,
    x_label: str,
    y_label: str,
    x_ticks: Sequence[tuple[float, str]],
    y_ticks: list[float],
    sx: Callable[[float], float],
    sy: Callable[[float], float],
) -> list[str]:
    left, right, top, bottom, width, height = g.left, g.right, g.top, g.bottom, g.width, g.height
    # A title too long for the layout's width takes two lines (the narrow layout leaves room).
    lines = textwrap.wrap(title, g.title_chars) or [""]
    if len(lines) > 2:
        lines = [lines[0], " ".join(lines[1:])]
    first_y = top - 10 - 15 * (len(lines) - 1)
    spans = "".join(
        f'<tspan x="{g.title_x}" y="{first_y + 15 * k}">{escape(line)}</tspan>'
        for k, line in enumerate(lines)
    )
    parts = [
        f'<text x="{g.title_x}" y="{first_y}" class="t">{spans}</text>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" class="ax"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" class="ax"/>',
    ]
    for tick, text in x_ticks:
        x = sx(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{height - bottom}" x2="{x:.1f}" y2="{height - bottom + 4}" class="ax"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{height - bottom + 15}" class="tk" text-anchor="middle">{escape(text)}</text>'
        )
    for tick in y_ticks:
        y = sy(tick)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{left - 5}" y="{y + 4:.1f}" class="tk" text-anchor="end">{_label(tick)}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 4}" class="tk" text-anchor="middle">{escape(x_label)}</text>'
    )
    middle = (top + height - bottom) / 2
    parts.append(
        f'<text x="11" y="{middle}" class="tk" text-anchor="middle" '
        f'transform="rotate(-90 11 {middle})">{escape(y_label)}</text>'
    )
    return parts


def legend(
    names: Sequence[str], styles: Sequence[str] | None = None, kind: str = "line", extra: str = ""
) -> str:
    """The legend as an HTML list: a swatch in each series' colour, then its name."""
    items = []
    for index, name in enumerate(names[:MAX_LEGEND]):
        dashed = " dashed" if styles and styles[index] else ""
        items.append(
            f'<li><span class="sw {kind}{dashed}" style="--c:{colour(index)}"></span>'
            f'<span title="{escape(name)}">{escape(name)}</span></li>'
        )
    if len(names) > MAX_LEGEND:
        items.append(f"<li>+{len(names) - MAX_LEGEND} more</li>")
    if extra:
        items.append(f'<li><span class="sw mark"></span><span>{escape(extra)}</span></li>')
    return f'<ul class="legend">{"".join(items)}</ul>'


def _wrap(draw: Callable[[Layout], tuple[list[str], int]], legend_html: str) -> str:
    """The figure: the chart drawn for each layout (``draw`` gives its parts and the extra
    height below the plot that rotated labels need), then the legend."""
    drawings = []
    for g in LAYOUTS:
        parts, extra = draw(g)
        drawings.append(
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{g.name}" viewBox="0 0 {g.width} {g.height + extra}" '
            f'preserveAspectRatio="xMinYMin meet" role="img">{"".join(parts)}</svg>'
        )
    return f'<figure class="chart">{"".join(drawings)}{legend_html}</figure>'


def _time_ticks(
    x: Sequence[float], time_axis: bool, x_label: str, count: int = 5
) -> tuple[list[tuple[float, str]], float, float, str]:
    """Ticks (in seconds, with labels), the axis range in seconds, and the axis label."""
    low, high = min(x, default=0.0), max(x, default=1.0)
    scale, unit = time_unit(high - low) if time_axis else (1.0, "")
    ticks = nice_ticks(low / scale, high / scale, count)
    label = f"{x_label} ({unit})" if time_axis else x_label
    return [(t * scale, _label(t)) for t in ticks], ticks[0] * scale, ticks[-1] * scale, label


def _scales(
    g: Layout, x_low: float, x_high: float, y_high: float
) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """Data to user units for a linear x from ``x_low`` to ``x_high`` and a y from 0 to ``y_high``."""

    def sx(v: float) -> float:
        return g.left + (v - x_low) / ((x_high - x_low) or 1) * (g.width - g.left - g.right)

    def sy(v: float) -> float:
        return g.height - g.bottom - v / (y_high or 1) * (g.height - g.top - g.bottom)

    return sx, sy


def line_chart(
    title: str,
    x: Sequence[float],
    series: Sequence[tuple[str, Sequence[float | None]]],
    x_label: str,
    y_label: str,
    step: bool = True,
    y_max: float | None = None,
    dashes: Sequence[str] | None = None,
    time_axis: bool = False,
) -> str:
    """Lines over a shared x; ``step`` draws piecewise-constant values; None breaks a line."""
    values = [v for _, ys in series for v in ys if v is not None]
    top = max(values, default=1.0)
    if y_max is not None:
        top = max(top, y_max)
    y_ticks = nice_ticks(0, top or 1)

    def draw(g: Layout) -> tuple[list[str], int]:
        x_ticks, x_low, x_high, x_text = _time_ticks(x, time_axis, x_label, g.x_ticks)
        sx, sy = _scales(g, x_low, x_high, y_ticks[-1] or 1)
        parts = _frame(g, title, x_text, y_label, x_ticks, y_ticks, sx, sy)
        for index, (_, ys) in enumerate(series):
            points: list[str] = []
            runs: list[list[str]] = [points]
            previous: float | None = None
            for xv, yv in zip(x, ys, strict=True):
                if yv is None:
                    points = []
                    runs.append(points)
                    previous = None
                    continue
                if step and previous is not None:
                    points.append(f"{sx(xv):.1f},{sy(previous):.1f}")
                points.append(f"{sx(xv):.1f},{sy(yv):.1f}")
                previous = yv
            dash = f' stroke-dasharray="{dashes[index]}"' if dashes and dashes[index] else ""
            for run in runs:
                if run:
                    parts.append(
                        f'<polyline fill="none" stroke="{colour(index)}" stroke-width="1.6"{dash} points="{" ".join(run)}"/>'
                    )
        return parts, 0

    return _wrap(draw, legend([name for name, _ in series], dashes))


def stacked_chart(
    title: str,
    x: Sequence[float],
    series: Sequence[tuple[str, Sequence[float]]],
    x_label: str,
    y_label: str,
    time_axis: bool = False,
    line: tuple[str, float] | None = None,
) -> str:
    """Piecewise-constant values stacked as areas (absolute amounts); ``line``: a dashed level."""
    totals = [sum(ys[k] for _, ys in series) for k in range(len(x))]
    top = max([*totals, line[1] if line else 0.0], default=1.0) or 1.0
    y_ticks = nice_ticks(0, top)

    def draw(g: Layout) -> tuple[list[str], int]:
        x_ticks, x_low, x_high, x_text = _time_ticks(x, time_axis, x_label, g.x_ticks)
        sx, sy = _scales(g, x_low, x_high, y_ticks[-1] or 1)
        parts = _frame(g, title, x_text, y_label, x_ticks, y_ticks, sx, sy)
        below = [0.0] * len(x)
        for index, (name, ys) in enumerate(series):
            above = [b + v for b, v in zip(below, ys, strict=True)]
            upper: list[str] = []
            lower: list[str] = []
            for k, xv in enumerate(x):
                if k:
                    upper.append(f"{sx(xv):.1f},{sy(above[k - 1]):.1f}")
                    lower.append(f"{sx(xv):.1f},{sy(below[k - 1]):.1f}")
                upper.append(f"{sx(xv):.1f},{sy(above[k]):.1f}")
                lower.append(f"{sx(xv):.1f},{sy(below[k]):.1f}")
            points = " ".join(upper + lower[::-1])
            parts.append(
                f'<polygon fill="{colour(index)}" fill-opacity="0.85" stroke="{colour(index)}" '
                f'stroke-width="0.5" points="{points}"><title>{escape(name)}</title></polygon>'
            )
            below = above
        if line is not None:
            y = sy(line[1])
            parts.append(
                f'<line x1="{g.left}" y1="{y:.1f}" x2="{g.width - g.right}" y2="{y:.1f}" class="mark"/>'
            )
        return parts, 0

    names = [name for name, _ in series]
    return _wrap(draw, legend(names, kind="box", extra=line[0] if line else ""))


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    y_label: str,
    stacked: bool = False,
    markers: Sequence[float | None] | None = None,
    marker_label: str = "",
    duration_axis: bool = False,
) -> str:
    """Grouped (or stacked) vertical bars per category; optional marker line per category.

    With ``duration_axis`` the values are seconds, shown in the unit that suits the largest.
    """
    if stacked:
        totals = [sum(ys[k] for _, ys in series) for k in range(len(categories))]
    else:
        totals = [max((ys[k] for _, ys in series), default=0) for k in range(len(categories))]
    top = max([*totals, *[m for m in markers or [] if m is not None]], default=1.0) or 1.0
    scale = 1.0
    if duration_axis:
        scale, unit = time_unit(top)
        y_label = f"{y_label} ({unit})"
    y_ticks = nice_ticks(0, top / scale)
    y_high = y_ticks[-1] * scale or 1

    def draw(g: Layout) -> tuple[list[str], int]:
        plot_width = g.width - g.left - g.right
        slot = plot_width / max(1, len(categories))
        _, sy = _scales(g, 0, 1, y_high)

        def sy_tick(v: float) -> float:
            return sy(v * scale)

        parts = _frame(g, title, "", y_label, [], y_ticks, lambda v: g.left, sy_tick)
        groups = 1 if stacked else max(1, len(series))
        bar = max(1.0, slot * 0.8 / groups)
        label_every = max(1, math.ceil(len(categories) / g.max_labels))
        base_y = g.height - g.bottom + 10
        for k, category in enumerate(categories):
            base = g.left + k * slot + slot * 0.1
            bottom = 0.0
            for index, (name, ys) in enumerate(series):
                value = ys[k]
                x = base if stacked else base + index * bar
                low = bottom if stacked else 0.0
                y_top, y_bottom = sy(low + value), sy(low)
                parts.append(
                    f'<rect x="{x:.1f}" y="{y_top:.1f}" width="{bar:.1f}" height="{max(0.0, y_bottom - y_top):.1f}" '
                    f'fill="{colour(index)}"><title>{escape(category)} {escape(name)}: {value:g}</title></rect>'
                )
                if stacked:
                    bottom += value
            if markers and markers[k] is not None:
                y = sy(markers[k] or 0)
                parts.append(
                    f'<line x1="{base - 1:.1f}" y1="{y:.1f}" x2="{base + slot * 0.8 + 1:.1f}" y2="{y:.1f}" class="mark">'
                    f"<title>{escape(category)} {escape(marker_label)}: {markers[k]:g}</title></line>"
                )
            if k % label_every == 0:
                cx = base + slot * 0.4
                cut = g.label_chars
                label = category if len(category) <= cut else category[: cut - 1] + "…"
                parts.append(
                    f'<text x="{cx:.1f}" y="{base_y}" class="tk" text-anchor="end" '
                    f'transform="rotate(-60 {cx:.1f} {base_y})"><title>{escape(category)}</title>'
                    f"{escape(label)}</text>"
                )
        return parts, g.label_space

    names = [name for name, _ in series]
    extra = marker_label if markers and marker_label else ""
    return _wrap(draw, legend(names, kind="box", extra=extra))


def cdf_chart(
    title: str, series: Sequence[tuple[str, Sequence[float]]], x_label: str, log_x: bool = False
) -> str:
    """Empirical CDFs of sorted samples in seconds (fraction of jobs with a value at most x).

    ``log_x``: a log-scale duration axis from 1 s; values under 1 s are drawn at 1 s.
    """
    x_high = max((values[-1] for _, values in series if values), default=1.0) or 1.0
    y_ticks = [0, 0.25, 0.5, 0.75, 1.0]

    def draw(g: Layout) -> tuple[list[str], int]:
        plot_width = g.width - g.left - g.right
        if log_x:
            low = 1.0
            high = max(10.0, x_high)
            ticks = [(s, text) for s, text in LOG_TICKS if s <= high * 1.0001][:: g.log_stride]
            span = math.log10(high / low)
            x_text = f"{x_label} (log scale; under 1 s drawn at 1 s)"

            def sx(v: float) -> float:
                return g.left + math.log10(max(v, low) / low) / span * plot_width

            x_ticks: Sequence[tuple[float, str]] = ticks
        else:
            x_ticks, _, right_end, x_text = _time_ticks([0.0, x_high], True, x_label, g.x_ticks)

            def sx(v: float) -> float:
                return g.left + v / (right_end or 1) * plot_width

        _, sy = _scales(g, 0, 1, 1.0)
        parts = _frame(g, title, x_text, "fraction of jobs", x_ticks, y_ticks, sx, sy)
        for index, (_, values) in enumerate(series):
            n = len(values)
            if not n:
                continue
            stride = max(1, n // 400)
            points = [f"{sx(0):.1f},{sy(0):.1f}"]
            for k in range(0, n, stride):
                points.append(f"{sx(values[k]):.1f},{sy(k / n):.1f}")
                points.append(f"{sx(values[k]):.1f},{sy((k + 1) / n):.1f}")
            points.append(f"{sx(values[-1]):.1f},{sy(1):.1f}")
            parts.append(
                f'<polyline fill="none" stroke="{colour(index)}" stroke-width="1.6" points="{" ".join(points)}"/>'
            )
        return parts, 0

    return _wrap(draw, legend([name for name, _ in series]))


STYLE = """
svg .t{font:600 13px sans-serif} svg .tk{font:11px sans-serif;fill:#333}
svg .ax{stroke:#333;stroke-width:1} svg .grid{stroke:#ddd;stroke-width:1}
svg .mark{stroke:#000;stroke-width:2;stroke-dasharray:4 2}
.chart{display:flex;flex-wrap:wrap;align-items:flex-start;gap:4px 12px;margin:10px 0;max-width:100%}
.chart svg{flex:1 1 420px;width:100%;max-width:720px;height:auto;min-width:0}
.chart svg.narrow{display:none}
@media (max-width:820px){.chart svg.wide{display:none} .chart svg.narrow{display:block}}
.legend{flex:0 1 180px;min-width:0;list-style:none;margin:0;padding:0;font:12px sans-serif;color:#333}
.legend li{display:flex;align-items:center;gap:6px;margin:2px 0;overflow-wrap:anywhere}
.legend .sw{flex:0 0 16px;height:0;border-top:2px solid var(--c)}
.legend .sw.dashed{border-top-style:dashed} .legend .sw.box{height:10px;border:0;background:var(--c)}
.legend .sw.mark{border-top:2px dashed #000}
@media (max-width:700px){.legend{flex-basis:100%;display:flex;flex-wrap:wrap;gap:0 12px}}
"""
