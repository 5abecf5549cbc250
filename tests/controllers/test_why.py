"""One vocabulary for why a job waits (issue 44, item 2): describe, submit, get and the
dashboard give the same cause word and sentence, from `views.why`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from pykueue.engine import pending_causes
from pykueue.standalone.admission import StandaloneAdmission
from pykueue.store.sqlite import SQLiteStore
from pykueue.views import dashboard_data

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {matchLabels: {team: ml}}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: "4"}]}]
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {team: ml}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: other}
spec: {clusterQueue: cq}
"""


def _workload(namespace: str, name: str, cpu: str, created: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


def test_describe_and_the_dashboard_give_the_same_cause_and_words(tmp_path: Path) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        store = SQLiteStore(tmp_path / "s.db", now=lambda: NOW)
        for doc in yaml.safe_load_all(QUEUES):
            await store.create(doc)
        # running takes 3 of 4 cpu; too-big asks more than the queue has; waiting fits once
        # running ends; outsider's namespace is not selected by the ClusterQueue.
        await store.create(_workload("ml", "running", "3", "2026-01-01T11:00:00Z"))
        await store.create(_workload("ml", "too-big", "64", "2026-01-01T11:01:00Z"))
        await store.create(_workload("ml", "waiting", "2", "2026-01-01T11:02:00Z"))
        await store.create(_workload("other", "outsider", "1", "2026-01-01T11:03:00Z"))
        admission = StandaloneAdmission(store, clock=lambda: NOW)
        await admission.sync()
        await admission.reconcile()
        described: dict[str, Any] = {}
        rows: dict[str, Any] = {}
        for key in ("ml/too-big", "ml/waiting", "other/outsider"):
            namespace, name = key.split("/")
            stored = await store.get("Workload", namespace, name)
            described[key] = admission.explain(stored).as_dict()
            rows[key] = dashboard_data.workload_row(admission.state, stored, {})
        store.close()
        return described, rows

    described, rows = asyncio.run(scenario())
    assert described["ml/too-big"]["reasons"][0]["category"] == pending_causes.CAPACITY
    assert described["ml/too-big"]["reasons"][0]["message"].startswith("can never fit as requested")
    assert described["other/outsider"]["reasons"][0]["category"] == pending_causes.POLICY
    for key, explanation in described.items():
        # Every waiting row says why, in the words describe uses, under the same cause.
        assert explanation["state"] == "Pending", (key, explanation)
        words = "; ".join(r["message"] for r in explanation["reasons"])
        assert rows[key]["reason"] == words and words, (key, rows[key], explanation)
        assert explanation["cause"] == rows[key]["cause"]
        assert explanation["cause"] in {r["category"] for r in explanation["reasons"]}, (key, explanation)
