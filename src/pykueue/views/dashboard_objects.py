"""One object for the dashboard's detail page: its manifest as stored, as YAML, if the caller may see it.

    GET /api/v1/dashboard/objects/{Kind}/{name}               ClusterQueue, Cohort, ResourceFlavor
    GET /api/v1/dashboard/objects/{Kind}/{namespace}/{name}   LocalQueue, Workload

The cut is the dashboard document's (`dashboard_data`): a tenant sees the Workloads and
LocalQueues of its namespaces, the ClusterQueues those LocalQueues point at, the
cohorts above them and the flavors they name. Anything else answers 404, the same
answer as an object that does not exist, so a tenant cannot learn another team's
object names by asking.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import yaml

from pykueue.api import access
from pykueue.engine.state import State
from pykueue.store.base import Manifest
from pykueue.views import dashboard_data

# The kinds the page links to, and whether they live in a namespace.
KINDS = {
    "ClusterQueue": False,
    "Cohort": False,
    "ResourceFlavor": False,
    "LocalQueue": True,
    "Workload": True,
}

# Fetch one stored object by kind, namespace ("" when cluster-scoped) and name; None when absent.
Lookup = Callable[[str, str, str], Awaitable[Manifest | None]]


class Refused(Exception):
    """The object is not there for this caller: an unknown kind, a bad path, absent or not visible."""


def address(kind: str, path: str) -> tuple[str, str]:
    """``path`` (the part after the kind) as namespace and name, checked against the kind."""
    if kind not in KINDS:
        raise Refused(f"the dashboard shows no kind {kind[:64]!r} (one of {', '.join(KINDS)})")
    parts = path.split("/")
    if KINDS[kind]:
        if len(parts) != 2 or not all(parts):
            raise Refused(f"a {kind} is addressed as {kind}/<namespace>/<name>, not {path[:128]!r}")
        return parts[0], parts[1]
    if len(parts) != 1 or not parts[0]:
        raise Refused(f"a {kind} is addressed as {kind}/<name>, not {path[:128]!r}")
    return "", parts[0]


def visible(state: State, identity: access.Identity, kind: str, namespace: str, name: str) -> bool:
    """Whether ``identity`` may see the object on the dashboard (see the module docstring)."""
    if identity.is_admin:
        return True
    if kind in ("Workload", "LocalQueue"):
        return access.may_read(identity, "Workload", namespace)
    queues = dashboard_data.visible_cluster_queues(state, identity)
    if kind == "ClusterQueue":
        return name in queues
    rows = [dashboard_data.cluster_queue_row(state, n) for n in queues]
    if kind == "Cohort":
        return any(c["name"] == name for c in dashboard_data.cohort_rows(state, rows))
    return any(u["flavor"] == name for row in rows for u in row["usage"])


async def answer(
    state: State, identity: access.Identity, kind: str, path: str, lookup: Lookup
) -> dict[str, Any]:
    """The detail page's document: kind, namespace, name and the manifest as YAML; or `Refused`."""
    namespace, name = address(kind, path)
    state.ensure_tree()
    if not visible(state, identity, kind, namespace, name):
        raise Refused(_absent(kind, namespace, name))
    manifest = await lookup(kind, namespace, name)
    if manifest is None:
        raise Refused(_absent(kind, namespace, name))
    text = yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return {"kind": kind, "namespace": namespace, "name": name, "yaml": text}


def _absent(kind: str, namespace: str, name: str) -> str:
    return f"no {kind} {namespace + '/' if namespace else ''}{name} that you may see"
