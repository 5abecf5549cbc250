"""The web dashboard in real headless Chromium against a real `pykueue up`: live, and cut to the caller.

One server, two tenants (alice in ``research``, bob in ``product``) sharing one
ClusterQueue of one CPU. A job holds the CPU; alice's second job waits behind it,
and bob's, too big for the queue, waits for ever.
The page must show the queue and the waiting workload with its cause and reason,
then, with no reload, show it admitted once the first job is deleted. Neither
tenant may see the other's workloads, on the page or in the JSON behind it.

Set PYKUEUE_SCREENSHOTS to a folder to keep the page's screenshots (docs/images/
holds the ones the docs show).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from browsing.browser import Browser

from .helpers import Server, job, wait_until, workload_of, write_config

KUEUE = "kueue.x-k8s.io/v1beta2"
DESKTOP = (1280, 900, False)
PHONE = (390, 844, True)
EN_DASH = "\u2013"  # the page writes a range as 8, an en dash, 20
EM_DASH = "\u2014"  # ...and no estimate (yet) as an em dash


def _queues() -> str:
    resources = [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "4Gi"}]
    docs: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"}},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "shared"},
            "spec": {
                "cohortName": "org",
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": "default-flavor", "resources": resources}],
                    }
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


def _row(key: str) -> str:
    """A script: the cells of the workload row ``key`` (null while it is not shown)."""
    return f"""(() => {{
      const row = document.querySelector('tr.workload[data-workload="{key}"]');
      if (!row) return null;
      const cell = (name) => row.querySelector('td.' + name).textContent;
      return {{state: cell('state'), cause: cell('cause'), reason: cell('reason'), eta: cell('eta'),
               position: cell('position'), queue: cell('queue')}};
    }})()"""


def _screenshot(browser: Browser, name: str) -> None:
    folder = os.environ.get("PYKUEUE_SCREENSHOTS")
    if folder:
        browser.screenshot(Path(folder) / name)


def test_a_tenant_watches_its_workload_wait_for_quota_then_start_live(
    tmp_path: Path, start_server: Callable[..., Server], browser: Browser
) -> None:
    server = start_server(write_config(tmp_path, _queues()))
    alice = server.cli("token", "create", "alice", "-n", "research").stdout.strip()
    bob = server.cli("token", "create", "bob", "-n", "product").stdout.strip()
    assert alice.startswith("pk_") and bob.startswith("pk_")

    assert server.apply([job("holder", "sleep 600", namespace="research")], token=alice).status_code == 200
    holder = workload_of(server, "research", "holder")
    wait_until(lambda: server.explanation(*holder.split("/"))["state"] == "Admitted")
    assert server.apply([job("waiter", "sleep 600", namespace="research")], token=alice).status_code == 200
    # Bob's job asks for more than the queue ever has: it waits too, for another cause, and never
    # overtakes alice's (equal priority and creation second would leave their order to their uids).
    secret_job = job("secret", "sleep 600", namespace="product", cpu="2")
    assert server.apply([secret_job], token=bob).status_code == 200
    waiter = workload_of(server, "research", "waiter")
    secret = workload_of(server, "product", "secret")

    browser.load(f"{server.url}/dashboard#token={alice}", *DESKTOP)
    assert browser.evaluate("location.hash") == "", "the token must leave the address bar"
    browser.evaluate("window.loadedOnce = true")  # gone if the page reloads
    # The estimator refreshes in the background (every 10 s): the row gains its estimate live.
    shown = browser.wait_for(
        f"(() => {{ const r = {_row(waiter)}; return r && r.cause === 'quota' && r.eta !== '{EM_DASH}' ? r : null; }})()",
        timeout=90,
    )
    assert shown["state"] == "Pending"
    assert shown["reason"], "a waiting workload says why in words"
    # Nothing has finished yet and the jobs set no limit: the holder's end is unknown, and so
    # is the waiter's start (issue 44, item 1: no made-up hour).
    assert shown["eta"] == "unknown", shown
    assert shown["position"].endswith(" of 2"), shown  # waiter and bob's job wait in the same ClusterQueue
    assert "shared" in shown["queue"]
    card = browser.evaluate(
        """(() => { const c = document.querySelector('[data-cluster-queue="shared"]');
           return c && {pending: c.querySelector('.pending b').textContent,
                        admitted: c.querySelector('.admitted b').textContent,
                        causes: [...c.querySelectorAll('[data-cause]')].map((x) => x.dataset.cause),
                        bars: [...c.querySelectorAll('[data-flavor-resource]')].map((x) => x.dataset.flavorResource)};
        })()"""
    )
    assert card == {
        "pending": "2",
        "admitted": "1",
        "causes": ["capacity", "quota"],
        "bars": ["default-flavor/cpu", "default-flavor/memory"],
    }
    assert browser.evaluate("!!document.querySelector('[data-cohort=\"org\"]')")
    assert browser.evaluate("!!document.querySelector('[data-chart=\"shared\"] svg path')")
    # Alice's page never names bob's workload, his namespace's LocalQueue included.
    assert browser.evaluate("document.querySelectorAll('[data-workload^=\"product/\"]').length") == 0
    assert secret.split("/")[1] not in browser.evaluate("document.body.innerText")
    assert browser.evaluate("document.querySelectorAll('[data-local-queue]').length") == 1
    # A workload's events unfold on a click.
    browser.evaluate(f"document.querySelector('tr.workload[data-workload=\"{holder}\"]').click()")
    events = browser.wait_for(f"document.querySelector('[data-events-of=\"{holder}\"]')?.textContent")
    assert "QuotaReserved=True" in events
    _screenshot(browser, "dashboard-desktop.png")

    deleted = server.request("DELETE", "/api/v1/objects/Job/research/holder", token=alice)
    assert deleted.status_code == 200, deleted.text
    admitted = browser.wait_for(
        f"(() => {{ const r = {_row(waiter)}; return r && r.state === 'Admitted' ? r : null; }})()",
        timeout=60,
    )
    assert admitted["cause"] == "" and admitted["eta"] == ""
    assert browser.evaluate("window.loadedOnce === true"), "the page changed without a reload"

    browser.load(f"{server.url}/dashboard", *PHONE)  # the token is kept in the tab's session
    browser.wait_for(_row(waiter))
    layout = browser.evaluate("({width: innerWidth, scroll: document.documentElement.scrollWidth})")
    assert layout["scroll"] <= layout["width"], "the page must not scroll sideways on a phone"
    _screenshot(browser, "dashboard-phone.png")


def test_the_dashboard_document_is_cut_to_the_caller(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(write_config(tmp_path, _queues()))
    alice = server.cli("token", "create", "alice", "-n", "research").stdout.strip()
    bob = server.cli("token", "create", "bob", "-n", "product").stdout.strip()
    server.apply([job("mine", "sleep 600", namespace="research")], token=alice)
    server.apply([job("theirs", "sleep 600", namespace="product")], token=bob)
    workload_of(server, "research", "mine")
    workload_of(server, "product", "theirs")

    def document(token: str | None) -> dict[str, Any]:
        answer: dict[str, Any] = server.api("GET", "/api/v1/dashboard", token=token)
        return answer

    admin = document(None)
    assert {w["namespace"] for w in admin["workloads"]} == {"research", "product"}
    assert {f"{q['namespace']}/{q['name']}" for q in admin["localQueues"]} == {
        "research/main",
        "product/main",
    }
    for token, own in ((alice, "research"), (bob, "product")):
        seen = document(token)
        assert {w["namespace"] for w in seen["workloads"]} == {own}
        assert [q["namespace"] for q in seen["localQueues"]] == [own]
        assert [q["name"] for q in seen["clusterQueues"]] == ["shared"]
        assert [c["name"] for c in seen["cohorts"]] == ["org"]
        assert all("estimatedStart" in w for w in seen["workloads"])
    assert server.request("GET", "/api/v1/dashboard", token="pk_not-a-token").status_code == 401
    # The page and its files hold no data and need no token; nothing else under static/ is served.
    page = httpx.get(f"{server.url}/dashboard", timeout=30)
    assert page.status_code == 200 and "dashboard.js" in page.text
    assert httpx.get(f"{server.url}/dashboard/static/dashboard.js", timeout=30).status_code == 200
    assert httpx.get(f"{server.url}/dashboard/static/dashboard.html", timeout=30).status_code == 404
    assert httpx.get(f"{server.url}/dashboard/static/%2E%2E%2Fapp.py", timeout=30).status_code == 404


def test_an_estimate_is_shown_as_minutes_with_its_range(browser: Browser, tmp_path: Path) -> None:
    """The rendering of the estimatedStart contract, with the page's own function."""
    script = Path(__file__).parents[2] / "src" / "pykueue" / "views" / "static" / "dashboard.js"
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><script>{script.read_text()}</script>")
    browser.load(page.as_uri(), *DESKTOP)
    shown = browser.evaluate(
        """(() => {
          const now = Date.parse('2026-01-01T12:00:00Z');
          return [
            estimatedStart({at: '2026-01-01T12:12:00Z', low: '2026-01-01T12:08:00Z',
                            high: '2026-01-01T12:20:00Z', basis: 'history'}, now),
            estimatedStart({at: '2026-01-01T15:00:00Z', low: '2026-01-01T14:00:00Z',
                            high: '2026-01-01T17:00:00Z', basis: 'history'}, now),
            estimatedStart({at: '2026-01-01T11:59:00Z', low: '2026-01-01T11:50:00Z',
                            high: '2026-01-01T12:05:00Z', basis: 'history'}, now),
            estimatedStart(null, now),
          ];
        })()"""
    )
    assert shown == [f"in ~12 min (8{EN_DASH}20)", f"in ~3 h (2{EN_DASH}5)", "any moment", EM_DASH]


def test_a_priority_shows_what_aging_added(browser: Browser, tmp_path: Path) -> None:
    """The Priority cell, with the page's own function: the aged part is named, or absent."""
    script = Path(__file__).parents[2] / "src" / "pykueue" / "views" / "static" / "dashboard.js"
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><script>{script.read_text()}</script>")
    browser.load(page.as_uri(), *DESKTOP)
    shown = browser.evaluate(
        "[priorityText({priority: 7, aged: 7}), priorityText({priority: 100, aged: 0}), priorityText({priority: null})]"
    )
    assert shown == ["7 (+7 aged)", "100", ""]
