"""Small inline-SVG charts: line, stacked-area and bar charts and CDFs, with no plotting library.

Each function returns one chart as HTML: a ``<figure class="chart">`` holding
the ``<svg>`` plot (axes, ticks, title; its ``viewBox`` lets it scale with the
page) and the legend as an HTML list beside it. The page's style puts the
legend to the right of the plot on a wide screen and below it on a narrow one
(a phone), so it is never off screen. Colours come from one fixed palette
(colour-blind-safe Okabe-Ito first), series beyond it cycle.

Time axes (``time_axis``) take seconds and show them in the unit that suits
the span: seconds, minutes, hours or days. Wait CDFs may use a log scale
(``log_x``), with human ticks (1 s, 10 s, 1 min, 10 min, 1 h, ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
WIDTH = 640
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 30, 34
LABEL_CHARS = 20  # category labels of bar charts, rotated below the axis
LABEL_SPACE = 90  # pixels they need
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
    title: str,
    x_label: str,
    y_label: str,
    x_ticks: Sequence[tuple[float, str]],
    y_ticks: list[float],
    sx: Callable[[float], float],
    sy: Callable[[float], float],
) -> list[str]:
    parts = [
        f'<text x="{LEFT}" y="{TOP - 12}" class="t">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" class="ax"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" class="ax"/>',
    ]
    for tick, text in x_ticks:
        x = sx(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{HEIGHT - BOTTOM}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM + 4}" class="ax"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 15}" class="tk" text-anchor="middle">{escape(text)}</text>'
        )
    for tick in y_ticks:
        y = sy(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{LEFT - 5}" y="{y + 4:.1f}" class="tk" text-anchor="end">{_label(tick)}</text>'
        )
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 4}" class="tk" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text x="12" y="{(TOP + HEIGHT - BOTTOM) / 2}" class="tk" text-anchor="middle" '
        f'transform="rotate(-90 12 {(TOP + HEIGHT - BOTTOM) / 2})">{escape(y_label)}</text>'
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


def _wrap(parts: list[str], legend_html: str, extra: int = 0) -> str:
    """The figure: the svg (``extra`` pixels below the usual height hold rotated labels), the legend."""
    body = "".join(parts)
    height = HEIGHT + extra
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'preserveAspectRatio="xMinYMin meet" role="img">{body}</svg>'
    )
    return f'<figure class="chart">{svg}{legend_html}</figure>'


def _time_ticks(
    x: Sequence[float], time_axis: bool, x_label: str
) -> tuple[list[tuple[float, str]], float, float, str]:
    """Ticks (in seconds, with labels), the axis range in seconds, and the axis label."""
    low, high = min(x, default=0.0), max(x, default=1.0)
    scale, unit = time_unit(high - low) if time_axis else (1.0, "")
    ticks = nice_ticks(low / scale, high / scale)
    label = f"{x_label} ({unit})" if time_axis else x_label
    return [(t * scale, _label(t)) for t in ticks], ticks[0] * scale, ticks[-1] * scale, label


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
    x_ticks, x_low, x_high, x_text = _time_ticks(x, time_axis, x_label)
    y_ticks = nice_ticks(0, top or 1)
    y_high = y_ticks[-1] or 1

    def sx(v: float) -> float:
        return LEFT + (v - x_low) / ((x_high - x_low) or 1) * (WIDTH - LEFT - RIGHT)

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v / y_high * (HEIGHT - TOP - BOTTOM)

    parts = _frame(title, x_text, y_label, x_ticks, y_ticks, sx, sy)
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
    return _wrap(parts, legend([name for name, _ in series], dashes))


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
    x_ticks, x_low, x_high, x_text = _time_ticks(x, time_axis, x_label)
    y_ticks = nice_ticks(0, top)
    y_high = y_ticks[-1] or 1

    def sx(v: float) -> float:
        return LEFT + (v - x_low) / ((x_high - x_low) or 1) * (WIDTH - LEFT - RIGHT)

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v / y_high * (HEIGHT - TOP - BOTTOM)

    parts = _frame(title, x_text, y_label, x_ticks, y_ticks, sx, sy)
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
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="mark"/>')
    names = [name for name, _ in series]
    return _wrap(parts, legend(names, kind="box", extra=line[0] if line else ""))


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
    plot_width = WIDTH - LEFT - RIGHT
    slot = plot_width / max(1, len(categories))

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v / y_high * (HEIGHT - TOP - BOTTOM)

    def sy_tick(v: float) -> float:
        return sy(v * scale)

    parts = _frame(title, "", y_label, [], y_ticks, lambda v: LEFT, sy_tick)
    groups = 1 if stacked else max(1, len(series))
    bar = max(1.0, slot * 0.8 / groups)
    label_every = max(1, math.ceil(len(categories) / 24))
    for k, category in enumerate(categories):
        base = LEFT + k * slot + slot * 0.1
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
            label = category if len(category) <= LABEL_CHARS else category[: LABEL_CHARS - 1] + "…"
            parts.append(
                f'<text x="{cx:.1f}" y="{HEIGHT - BOTTOM + 10}" class="tk" text-anchor="end" '
                f'transform="rotate(-60 {cx:.1f} {HEIGHT - BOTTOM + 10})"><title>{escape(category)}</title>'
                f"{escape(label)}</text>"
            )
    names = [name for name, _ in series]
    extra = marker_label if markers and marker_label else ""
    return _wrap(parts, legend(names, kind="box", extra=extra), LABEL_SPACE)


def cdf_chart(
    title: str, series: Sequence[tuple[str, Sequence[float]]], x_label: str, log_x: bool = False
) -> str:
    """Empirical CDFs of sorted samples in seconds (fraction of jobs with a value at most x).

    ``log_x``: a log-scale duration axis from 1 s; values under 1 s are drawn at 1 s.
    """
    x_high = max((values[-1] for _, values in series if values), default=1.0) or 1.0
    y_ticks = [0, 0.25, 0.5, 0.75, 1.0]
    if log_x:
        low = 1.0
        high = max(10.0, x_high)
        ticks = [(s, text) for s, text in LOG_TICKS if s <= high * 1.0001]
        span = math.log10(high / low)
        x_text = f"{x_label} (log scale; under 1 s drawn at 1 s)"

        def sx(v: float) -> float:
            return LEFT + math.log10(max(v, low) / low) / span * (WIDTH - LEFT - RIGHT)

        x_ticks: Sequence[tuple[float, str]] = ticks
    else:
        x_ticks, _, high, x_text = _time_ticks([0.0, x_high], True, x_label)

        def sx(v: float) -> float:
            return LEFT + v / (high or 1) * (WIDTH - LEFT - RIGHT)

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v * (HEIGHT - TOP - BOTTOM)

    parts = _frame(title, x_text, "fraction of jobs", x_ticks, y_ticks, sx, sy)
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
    return _wrap(parts, legend([name for name, _ in series]))


STYLE = """
svg .t{font:600 13px sans-serif} svg .tk{font:11px sans-serif;fill:#333}
svg .ax{stroke:#333;stroke-width:1} svg .grid{stroke:#ddd;stroke-width:1}
svg .mark{stroke:#000;stroke-width:2;stroke-dasharray:4 2}
.chart{display:flex;flex-wrap:wrap;align-items:flex-start;gap:4px 12px;margin:10px 0;max-width:100%}
.chart svg{flex:1 1 420px;width:100%;max-width:720px;height:auto;min-width:0}
.legend{flex:0 1 180px;min-width:0;list-style:none;margin:0;padding:0;font:12px sans-serif;color:#333}
.legend li{display:flex;align-items:center;gap:6px;margin:2px 0;overflow-wrap:anywhere}
.legend .sw{flex:0 0 16px;height:0;border-top:2px solid var(--c)}
.legend .sw.dashed{border-top-style:dashed} .legend .sw.box{height:10px;border:0;background:var(--c)}
.legend .sw.mark{border-top:2px dashed #000}
@media (max-width:700px){.legend{flex-basis:100%;display:flex;flex-wrap:wrap;gap:0 12px}}
"""
