"""The report and plan pages in real headless Chromium at desktop and phone widths.

Each page is measured after layout: the page must not scroll sideways, no chart
(its svg and its legend) may reach past the viewport, every legend entry must be
visible on screen, and on a phone the legend must sit below its plot (beside it
on a desktop). The phone viewport is Chromium's mobile emulation, which honours
the page's viewport meta as a phone does: without it the page would be laid out
980 px wide and scroll.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from browsing.browser import Browser
from pykueue.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
VIEWPORTS = {"desktop": (1280, 900, False), "phone": (375, 812, True)}
# a phone whose charts are 420 px wide (the page pads each side)
TEXT_VIEWPORTS = {**VIEWPORTS, "phone-420": (444, 900, True)}

TEXT = """
(() => {
  const charts = [...document.querySelectorAll('figure.chart')].map((fig) => {
    const svg = [...fig.querySelectorAll('svg')].find((s) => getComputedStyle(s).display !== 'none');
    const frame = svg.getBoundingClientRect();
    const scale = svg.getScreenCTM().a;  // CSS px per user unit
    const texts = [...svg.querySelectorAll('text')].map((t) => {
      const r = t.getBoundingClientRect();
      return {text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * scale,
              tick: t.classList.contains('tk') && t.getAttribute('text-anchor') === 'middle'
                    && !t.hasAttribute('transform'),
              left: r.left, right: r.right, top: r.top, bottom: r.bottom};
    });
    return {title: (svg.querySelector('.t') || {}).textContent, width: frame.width,
            frame: {left: frame.left, right: frame.right, top: frame.top, bottom: frame.bottom}, texts};
  });
  return {charts};
})()
"""

MEASURE = """
(() => {
  const width = window.innerWidth;
  const box = (el) => { const r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height}; };
  // a chart is drawn for a wide and a narrow layout; the page shows one of them
  const shown = (fig) => [...fig.querySelectorAll('svg')].find((s) => getComputedStyle(s).display !== 'none');
  const charts = [...document.querySelectorAll('figure.chart')].map((fig) => ({
    title: (shown(fig).querySelector('.t') || {}).textContent,
    figure: box(fig),
    svg: box(shown(fig)),
    legend: box(fig.querySelector('.legend')),
    items: [...fig.querySelectorAll('.legend li')].map((li) => {
      const style = getComputedStyle(li);
      return {box: box(li), text: li.textContent,
              shown: style.visibility !== 'hidden' && style.display !== 'none'};
    }),
  }));
  return {width, scrollWidth: document.documentElement.scrollWidth, charts};
})()
"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pages")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "simulate",
            "--queues",
            str(EXAMPLES / "queues.yaml"),
            "--trace",
            str(EXAMPLES / "trace.csv"),
            "--out",
            str(out / "sim"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app,
        [
            "plan",
            "--trace",
            str(EXAMPLES / "trace-shared.csv"),
            "--queues",
            str(EXAMPLES / "shared.yaml"),
            "--queues",
            str(EXAMPLES / "shared-fair.yaml"),
            "--queues",
            str(EXAMPLES / "queues-capped.yaml"),
            "--out",
            str(out / "plan"),
            "--no-progress",
            "--seeds",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    multikueue = EXAMPLES / "multikueue"
    result = runner.invoke(
        app,
        [
            "simulate",
            "--queues",
            str(multikueue / "manager.yaml"),
            *[f"--cluster=worker{k}={multikueue / 'workers' / f'worker{k}.yaml'}" for k in (1, 2)],
            "--trace",
            str(multikueue / "trace.csv"),
            "--out",
            str(out / "multikueue"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    return {
        "report": out / "sim" / "report.html",
        "MultiKueue report": out / "multikueue" / "report.html",
        "plan": out / "plan" / "plan.html",
        "plan's design report": out / "plan" / "report-shared-fair.html",
    }


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as running:
        yield running


@pytest.mark.parametrize("viewport", sorted(VIEWPORTS))
@pytest.mark.parametrize("page", ["report", "plan", "plan's design report", "MultiKueue report"])
def test_charts_fit_and_legends_are_visible(
    browser: Browser, pages: dict[str, Path], page: str, viewport: str
):
    width, height, mobile = VIEWPORTS[viewport]
    seen = browser.measure(pages[page].as_uri(), width, height, mobile, MEASURE)
    assert seen["width"] == width
    assert seen["scrollWidth"] <= width, f"{page} scrolls sideways at {viewport} width"
    charts = seen["charts"]
    assert len(charts) >= 3
    for chart in charts:
        name = f"{page} / {chart['title']} at {viewport}"
        for part in ("figure", "svg", "legend"):
            assert chart[part]["left"] >= -0.5 and chart[part]["right"] <= width + 0.5, (
                f"{name}: {part} overflows"
            )
        assert chart["svg"]["width"] > 0.8 * min(width - 40, 640) or chart["svg"]["width"] >= 300, name
        assert chart["items"], f"{name}: no legend"
        for item in chart["items"]:
            box = item["box"]
            assert item["shown"] and box["width"] > 0 and box["height"] > 0, f"{name}: {item['text']} hidden"
            assert box["left"] >= -0.5 and box["right"] <= width + 0.5, f"{name}: {item['text']} off screen"
        if viewport == "phone":
            assert chart["legend"]["top"] >= chart["svg"]["bottom"] - 0.5, f"{name}: legend not below"
        else:
            assert chart["legend"]["left"] >= chart["svg"]["right"] - 0.5, f"{name}: legend not beside"


@pytest.mark.parametrize("viewport", sorted(TEXT_VIEWPORTS))
@pytest.mark.parametrize("page", ["report", "plan", "MultiKueue report"])
def test_chart_text_is_at_least_11_px_and_inside_its_chart(
    browser: Browser, pages: dict[str, Path], page: str, viewport: str
):
    """On a phone the narrow drawing is shown: its labels are >= 11 CSS px (the wide drawing
    scaled to 420 px made them about 7 px), every text stays inside its chart, and the x-axis
    tick labels do not overlap."""
    width, height, mobile = TEXT_VIEWPORTS[viewport]
    seen = browser.measure(pages[page].as_uri(), width, height, mobile, TEXT)
    charts = seen["charts"]
    assert len(charts) >= 3
    if viewport == "phone-420":
        assert any(abs(chart["width"] - 420) < 12 for chart in charts), [c["width"] for c in charts]
    for chart in charts:
        name = f"{page} / {chart['title']} at {viewport}"
        frame = chart["frame"]
        for text in chart["texts"]:
            assert text["px"] >= 11 - 0.01, f"{name}: {text['text']!r} is {text['px']:.1f} px"
            if text["text"]:
                assert text["left"] >= frame["left"] - 1 and text["right"] <= frame["right"] + 1, (
                    f"{name}: {text['text']!r} leaves the chart sideways"
                )
                assert text["top"] >= frame["top"] - 1 and text["bottom"] <= frame["bottom"] + 1, (
                    f"{name}: {text['text']!r} leaves the chart"
                )
        row = sorted((t for t in chart["texts"] if t["tick"] and t["text"]), key=lambda t: t["left"])
        for a, b in itertools.pairwise(row):
            if abs(a["top"] - b["top"]) < 2:  # the same row of x ticks
                assert a["right"] <= b["left"] + 0.5, f"{name}: {a['text']!r} overlaps {b['text']!r}"
