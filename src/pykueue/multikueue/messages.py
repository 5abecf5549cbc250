"""The words of MultiKueue's conditions: what failed, with which worker, and how.

A condition's message is read in `kubectl describe`; it says what was tried, against which
worker (its name and server), and what answered: the HTTP status and reason when the
worker's API server answered, else why nothing did (no Python exception reprs).
"""

from __future__ import annotations

from collections.abc import Sequence

from pykueue.errors import StoreError

# What the manager asks a worker to know it is there (`ClusterConnections._probe`).
PROBE_CALL = "GET /version"


def worker_failed(cluster: str, server: str, exc: StoreError, call: str = PROBE_CALL) -> str:
    """The Active=False message of a MultiKueueCluster whose worker did not do ``call``."""
    worker = f"worker {cluster}" + (f" ({server})" if server else "")
    if exc.http_status:
        answer = f"HTTP {exc.http_status}" + (f" {exc.http_reason}" if exc.http_reason else "")
        if exc.http_message and exc.http_message != exc.http_reason:
            answer += f": {exc.http_message}"
        return f"{worker} refused {call}: {answer}"
    return f"cannot reach {worker}: {exc}"


def _listed(names: Sequence[str]) -> str:
    # Upstream formats the lists with Go's %v: [a b].
    return "[" + " ".join(names) + "]"


def unusable_clusters(missing: Sequence[str], inactive: Sequence[str]) -> str:
    """An AdmissionCheck's Active message for clusters of its MultiKueueConfig it cannot use:
    named but with no MultiKueueCluster, or with one that is not Active (upstream's words)."""
    parts = []
    if missing:
        parts.append(f"Missing clusters: {_listed(missing)}")
    if inactive:
        parts.append(f"Inactive clusters: {_listed(inactive)}")
    return ", ".join(parts)
