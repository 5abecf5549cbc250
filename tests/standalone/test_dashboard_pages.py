"""The dashboard's markers, flavor and object pages, and filter, in real Chromium (issue 44, item 5).

One `pykueue up`, one ClusterQueue with two resource groups: CPUs and memory of
``default-flavor``, and GPUs of a flavor with a long name (the one the page used to
cut). Alice's jobs in ``research``: one succeeds, one fails, a low-priority one is
preempted by an urgent one. Bob's job in ``product`` waits for ever. At a desktop
width (1400) and a phone width (420): every flavor name is shown whole, each
finished or preempted workload carries its marker, the filter narrows the lists,
names link to pages with the object's YAML, and alice gets no page of bob's objects.

Set PYKUEUE_SCREENSHOTS to a folder to keep the screenshots (docs/images/ holds the
ones the docs show).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from browsing.browser import Browser

from .helpers import Server, job, wait_until, workload_of, write_config

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU_FLAVOR = "a100-80gb-sxm4-nvidia-hgx-reserved"
DESKTOP = (1400, 900, False)
PHONE = (420, 900, True)


def _queues() -> str:
    cpu = [{"name": "cpu", "nominalQuota": "2"}, {"name": "memory", "nominalQuota": "4Gi"}]
    docs: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": GPU_FLAVOR},
            "spec": {
                "nodeLabels": {"nvidia.com/gpu.product": "A100-SXM4-80GB"},
                "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            },
        },
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"}, "value": 1000},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "batch"}, "value": 10},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "shared"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": "default-flavor", "resources": cpu}],
                    },
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": GPU_FLAVOR,
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}],
                            }
                        ],
                    },
                ],
            },
        },
    ]
    for namespace in ("research", "product"):
        docs.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "main", "namespace": namespace},
                "spec": {"clusterQueue": "shared"},
            }
        )
    return yaml.safe_dump_all(docs)


def _not_blank(png: bytes, width: int) -> None:
    """The screenshot is a PNG of the viewport's width whose pixels are not all one colour."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    shot_width = struct.unpack(">I", png[16:20])[0]
    assert shot_width == width, (shot_width, width)
    data, at = b"", 8
    while at < len(png):
        length = struct.unpack(">I", png[at : at + 4])[0]
        if png[at + 4 : at + 8] == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    pixels = zlib.decompress(data)
    # A blank page filters to (almost) all zero bytes; a drawn one has text, bars and colours.
    sample = pixels[::97]
    assert len(set(pixels)) > 32 and sum(1 for b in sample if b) > len(sample) // 200


def _shot(browser: Browser, name: str, width: int) -> None:
    png = browser.png()
    _not_blank(png, width)
    folder = os.environ.get("PYKUEUE_SCREENSHOTS")
    if folder:
        (Path(folder) / name).write_bytes(png)


# Every flavor label on the page: its text, whether it is cut, and whether its box is inside the viewport.
LABELS = """[...document.querySelectorAll('.bar-row .label')].filter((x) => x.offsetParent).map((x) => {
  const box = x.getBoundingClientRect();
  return {text: x.textContent, cut: x.scrollWidth > x.clientWidth + 1,
          inside: box.left >= 0 && box.right <= innerWidth + 0.5 && box.width > 0};
})"""
OUTCOMES = """Object.fromEntries([...document.querySelectorAll('tr.workload')].map((r) => {
  const m = r.querySelector('[data-outcome]');
  return [r.dataset.workload, m && {outcome: m.dataset.outcome, text: m.textContent,
          icon: m.querySelector('[aria-hidden="true"]')?.textContent || '', color: getComputedStyle(m).color,
          inside: m.getBoundingClientRect().right <= innerWidth + 0.5}];
}))"""
SHOWN = "[...document.querySelectorAll('tr.workload')].filter((r) => r.offsetParent).map((r) => r.dataset.workload)"
LAYOUT = "({width: innerWidth, scroll: document.documentElement.scrollWidth})"


def _filter(browser: Browser, text: str) -> list[str]:
    browser.evaluate(
        f"(() => {{ const f = document.getElementById('filter'); f.value = {json.dumps(text)};"
        " f.dispatchEvent(new Event('input')); })()"
    )
    return list(browser.evaluate(SHOWN))


def _labels_whole(browser: Browser) -> list[str]:
    labels = browser.wait_for(f"(() => {{ const l = {LABELS}; return l.length ? l : null; }})()")
    assert all(not x["cut"] and x["inside"] for x in labels), labels
    return [x["text"] for x in labels]


def _run_jobs(server: Server, alice: str, bob: str) -> dict[str, str]:
    """Alice's succeeded, failed, preempted and running workloads, and bob's waiting one, by job name."""
    done = [
        job("ok", "true", namespace="research"),
        job("bad", "exit 3", namespace="research", backoff_limit=0),
    ]
    assert server.apply(done, token=alice).status_code == 200
    wait_until(
        lambda: [server.jobs()[f"research/{n}"]["state"] for n in ("ok", "bad")] == ["Succeeded", "Failed"]
    )
    # Priority classes are for the admin to use (a tenant's token may be refused one): the admin submits these.
    low = job("low", "sleep 600", namespace="research", cpu="2", priority_class="batch", grace=1)
    assert server.apply([low]).status_code == 200
    wait_until(lambda: server.jobs()["research/low"]["state"] == "Running")
    high = job("high", "sleep 600", namespace="research", cpu="2", priority_class="urgent")
    assert server.apply([high]).status_code == 200
    assert (
        server.apply([job("secret", "sleep 600", namespace="product", cpu="4")], token=bob).status_code == 200
    )
    keys = {n: workload_of(server, "research", n) for n in ("ok", "bad", "low", "high")}
    keys["secret"] = workload_of(server, "product", "secret")
    wait_until(lambda: server.explanation(*keys["high"].split("/"))["state"] == "Admitted", timeout=60)
    return keys


def test_markers_flavors_filter_and_object_pages_at_desktop_and_phone_widths(
    tmp_path: Path, start_server: Callable[..., Server], browser: Browser
) -> None:
    server = start_server(write_config(tmp_path, _queues()))
    alice = server.cli("token", "create", "alice", "-n", "research").stdout.strip()
    bob = server.cli("token", "create", "bob", "-n", "product").stdout.strip()
    keys = _run_jobs(server, alice, bob)

    browser.load(f"{server.url}/dashboard#token={alice}", *DESKTOP)
    outcomes = browser.wait_for(
        f"(() => {{ const o = {OUTCOMES}; return o['{keys['low']}'] && o['{keys['ok']}'] ? o : null; }})()",
        timeout=60,
    )
    # (2) A marker says how each finished or preempted workload ended: icon, word and colour.
    marked = {name: outcomes[key] for name, key in keys.items() if key in outcomes}
    assert {n: (m or {}).get("outcome") for n, m in marked.items()} == {
        "ok": "Succeeded",
        "bad": "Failed",
        "low": "Preempted",
        "high": None,
    }
    assert [marked[n]["text"] for n in ("ok", "bad", "low")] == [
        "\u2713Succeeded",
        "\u2717Failed",
        "\u21baPreempted",
    ]
    assert len({marked[n]["color"] for n in ("ok", "bad", "low")}) == 3
    assert all(marked[n]["icon"] for n in ("ok", "bad", "low")), "the icon is hidden from screen readers"

    # (1) Every flavor name is shown whole, the long GPU flavor's included.
    texts = _labels_whole(browser)
    assert f"{GPU_FLAVOR} · nvidia.com/gpu" in texts and "default-flavor · cpu" in texts

    # (3) The flavor list: the nodes each flavor stands for, and the queues that use it.
    card = browser.evaluate(f"document.querySelector('[data-flavor=\"{GPU_FLAVOR}\"]').innerText")
    assert "nvidia.com/gpu.product=A100-SXM4-80GB" in card and "nvidia.com/gpu=present:NoSchedule" in card
    assert "shared" in card and "0 / 8" in card

    # (5) The filter narrows every list, by state, name or queue, and the address keeps it.
    assert _filter(browser, "failed") == [keys["bad"]]
    assert browser.evaluate("location.hash") == "#q=failed"
    assert _filter(browser, "succeeded") == [keys["ok"]]
    assert sorted(_filter(browser, "shared pending")) == [keys["low"]]
    assert _filter(browser, keys["high"].split("/")[1]) == [keys["high"]]
    assert _filter(browser, "product") == [], "alice has nothing in product"
    assert browser.evaluate("getComputedStyle(document.getElementById('no-workloads')).display") != "none"
    assert len(_filter(browser, "")) == 4
    assert browser.evaluate("location.hash") == ""
    _shot(browser, "dashboard-desktop-markers.png", DESKTOP[0])

    # (4) A click on a flavor's name opens its page, with its YAML as stored.
    browser.evaluate(f"document.querySelector('[data-flavor=\"{GPU_FLAVOR}\"] h3 a').click()")
    shown = browser.wait_for("document.getElementById('yaml').textContent")
    assert browser.evaluate("location.hash") == f"#ResourceFlavor/{GPU_FLAVOR}"
    flavor = yaml.safe_load(shown)
    assert flavor["kind"] == "ResourceFlavor" and flavor["metadata"]["name"] == GPU_FLAVOR
    assert "nodeTaints" in flavor["spec"]
    assert browser.evaluate("document.getElementById('board').hidden")
    _shot(browser, "dashboard-flavor.png", DESKTOP[0])

    _object_pages(server, browser, keys, alice, bob)
    _phone(server, browser, keys)


def _open(browser: Browser, url: str, size: tuple[int, int, bool]) -> None:
    """Load ``url`` afresh: a new fragment alone would be a same-page move, with no load event."""
    browser.load("about:blank", *size)
    browser.load(url, *size)


def _object_page(server: Server, browser: Browser, route: str, size: tuple[int, int, bool]) -> dict[str, Any]:
    """Open ``route`` by its address (a deep link); the page's title, error and YAML once drawn."""
    _open(browser, f"{server.url}/dashboard#{route}", size)
    answer: dict[str, Any] = browser.wait_for(
        """(() => { const y = document.getElementById('yaml'), e = document.getElementById('detail-error');
          return (y.textContent || e.textContent) && {title: document.getElementById('detail-title').textContent,
            yaml: y.hidden ? '' : y.textContent, error: e.textContent,
            summary: document.getElementById('detail-summary').innerText}; })()"""
    )
    return answer


def _object_pages(server: Server, browser: Browser, keys: dict[str, str], alice: str, bob: str) -> None:
    failed = _object_page(server, browser, f"Workload/{keys['bad']}", DESKTOP)
    assert failed["title"] == f"Workload {keys['bad']}"
    manifest = yaml.safe_load(failed["yaml"])
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Workload", keys["bad"].split("/")[1])
    assert "Failed" in failed["summary"]
    queue = _object_page(server, browser, "ClusterQueue/shared", DESKTOP)
    assert yaml.safe_load(queue["yaml"])["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert "research/main" in queue["summary"]
    local = _object_page(server, browser, "LocalQueue/research/main", DESKTOP)
    assert yaml.safe_load(local["yaml"])["spec"]["clusterQueue"] == "shared"
    # Bob's workload and LocalQueue have no page for alice: the same words as an absent one.
    for route in (f"Workload/{keys['secret']}", "LocalQueue/product/main", "Workload/research/no-such"):
        hidden = _object_page(server, browser, route, DESKTOP)
        assert hidden["yaml"] == "" and hidden["error"].startswith("no "), (route, hidden)
        assert keys["secret"].split("/")[1] not in hidden["summary"]
    path = f"/api/v1/dashboard/objects/Workload/{keys['secret']}"
    assert server.request("GET", path, token=alice).status_code == 404
    assert server.request("GET", path, token=bob).status_code == 200
    assert server.request("GET", "/api/v1/dashboard/objects/Workload/x", token=bob).status_code == 404


def _phone(server: Server, browser: Browser, keys: dict[str, str]) -> None:
    _open(browser, f"{server.url}/dashboard#q=shared", PHONE)  # a filtered view, linked
    browser.wait_for(f"!!document.querySelector('tr.workload[data-workload=\"{keys['low']}\"]')")
    assert browser.evaluate("document.getElementById('filter').value") == "shared"
    assert keys["high"] in browser.evaluate(SHOWN)
    _labels_whole(browser)
    outcomes = browser.evaluate(OUTCOMES)
    assert outcomes[keys["low"]]["outcome"] == "Preempted" and outcomes[keys["low"]]["inside"]
    layout = browser.evaluate(LAYOUT)
    assert layout["scroll"] <= layout["width"], "the page must not scroll sideways on a phone"
    box = browser.evaluate("document.getElementById('filter').getBoundingClientRect().right")
    assert box <= PHONE[0]
    _shot(browser, "dashboard-phone-markers.png", PHONE[0])
    page = _object_page(server, browser, f"ResourceFlavor/{GPU_FLAVOR}", PHONE)
    assert GPU_FLAVOR in page["yaml"]
    _labels_whole(browser)
    layout = browser.evaluate(LAYOUT)
    assert layout["scroll"] <= layout["width"], "an object page must not scroll sideways on a phone"
    _shot(browser, "dashboard-phone-flavor.png", PHONE[0])
