"""Small inline-SVG charts: line charts, bar charts and CDFs, with no plotting library.

Each function returns one ``<svg>`` element as text, sized in CSS pixels, with
axes, ticks and a legend, so the HTML report is a single file that opens
offline. Colours come from one fixed palette (colour-blind-safe Okabe-Ito
first), series beyond it cycle.
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
WIDTH = 720
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 30, 34
LABEL_CHARS = 20  # category labels of bar charts, rotated below the axis
LABEL_SPACE = 90  # pixels they need


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


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
    if abs(value) >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _frame(
    title: str,
    x_label: str,
    y_label: str,
    x_ticks: list[float],
    y_ticks: list[float],
    sx: Callable[[float], float],
    sy: Callable[[float], float],
) -> list[str]:
    parts = [
        f'<text x="{LEFT}" y="{TOP - 12}" class="t">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" class="ax"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" class="ax"/>',
    ]
    for tick in x_ticks:
        x = sx(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{HEIGHT - BOTTOM}" x2="{x:.1f}" y2="{HEIGHT - BOTTOM + 4}" class="ax"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 15}" class="tk" text-anchor="middle">{_label(tick)}</text>'
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


def _legend(names: Sequence[str], styles: Sequence[str] | None = None) -> list[str]:
    parts = []
    for index, name in enumerate(names[:13]):
        y = TOP + index * 15
        x = WIDTH - RIGHT + 10
        dash = f' stroke-dasharray="{styles[index]}"' if styles and styles[index] else ""
        parts.append(
            f'<line x1="{x}" y1="{y - 4}" x2="{x + 16}" y2="{y - 4}" stroke="{colour(index)}" stroke-width="2"{dash}/>'
        )
        label = name if len(name) <= 22 else name[:21] + "…"
        parts.append(
            f'<text x="{x + 20}" y="{y}" class="tk"><title>{escape(name)}</title>{escape(label)}</text>'
        )
    if len(names) > 13:
        parts.append(
            f'<text x="{WIDTH - RIGHT + 10}" y="{TOP + 13 * 15}" class="tk">+{len(names) - 13} more</text>'
        )
    return parts


def _wrap(parts: list[str], extra: int = 0) -> str:
    """The svg element; ``extra`` pixels below the usual height hold rotated category labels."""
    body = "".join(parts)
    height = HEIGHT + extra
    return f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">{body}</svg>'


def line_chart(
    title: str,
    x: Sequence[float],
    series: Sequence[tuple[str, Sequence[float | None]]],
    x_label: str,
    y_label: str,
    step: bool = True,
    y_max: float | None = None,
    dashes: Sequence[str] | None = None,
) -> str:
    """Lines over a shared x; ``step`` draws piecewise-constant values; None breaks a line."""
    values = [v for _, ys in series for v in ys if v is not None]
    top = max(values, default=1.0)
    if y_max is not None:
        top = max(top, y_max)
    x_ticks = nice_ticks(min(x, default=0), max(x, default=1))
    y_ticks = nice_ticks(0, top or 1)
    x_low, x_high = x_ticks[0], x_ticks[-1]
    y_high = y_ticks[-1] or 1

    def sx(v: float) -> float:
        return LEFT + (v - x_low) / ((x_high - x_low) or 1) * (WIDTH - LEFT - RIGHT)

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v / y_high * (HEIGHT - TOP - BOTTOM)

    parts = _frame(title, x_label, y_label, x_ticks, y_ticks, sx, sy)
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
    parts.extend(_legend([name for name, _ in series], dashes))
    return _wrap(parts)


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    y_label: str,
    stacked: bool = False,
    markers: Sequence[float | None] | None = None,
    marker_label: str = "",
) -> str:
    """Grouped (or stacked) vertical bars per category; optional marker line per category."""
    if stacked:
        totals = [sum(ys[k] for _, ys in series) for k in range(len(categories))]
    else:
        totals = [max((ys[k] for _, ys in series), default=0) for k in range(len(categories))]
    top = max([*totals, *[m for m in markers or [] if m is not None]], default=1.0) or 1.0
    y_ticks = nice_ticks(0, top)
    y_high = y_ticks[-1] or 1
    plot_width = WIDTH - LEFT - RIGHT
    slot = plot_width / max(1, len(categories))

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v / y_high * (HEIGHT - TOP - BOTTOM)

    parts = _frame(title, "", y_label, [], y_ticks, lambda v: LEFT, sy)
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
    parts.extend(_legend(names))
    if markers and marker_label:
        y = TOP + len(names) * 15
        x = WIDTH - RIGHT + 10
        parts.append(f'<line x1="{x}" y1="{y - 4}" x2="{x + 16}" y2="{y - 4}" class="mark"/>')
        parts.append(f'<text x="{x + 20}" y="{y}" class="tk">{escape(marker_label)}</text>')
    return _wrap(parts, LABEL_SPACE)


def cdf_chart(title: str, series: Sequence[tuple[str, Sequence[float]]], x_label: str) -> str:
    """Empirical CDFs of sorted samples (fraction of jobs with a value at most x)."""
    x_high = max((values[-1] for _, values in series if values), default=1.0) or 1.0
    x_ticks = nice_ticks(0, x_high)
    y_ticks = [0, 0.25, 0.5, 0.75, 1.0]

    def sx(v: float) -> float:
        return LEFT + v / (x_ticks[-1] or 1) * (WIDTH - LEFT - RIGHT)

    def sy(v: float) -> float:
        return HEIGHT - BOTTOM - v * (HEIGHT - TOP - BOTTOM)

    parts = _frame(title, x_label, "fraction of jobs", x_ticks, y_ticks, sx, sy)
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
    parts.extend(_legend([name for name, _ in series]))
    return _wrap(parts)


STYLE = """
svg .t{font:600 13px sans-serif} svg .tk{font:11px sans-serif;fill:#333}
svg .ax{stroke:#333;stroke-width:1} svg .grid{stroke:#ddd;stroke-width:1}
svg .mark{stroke:#000;stroke-width:2;stroke-dasharray:4 2}
"""
