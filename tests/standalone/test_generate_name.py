"""generateName in standalone `apply`/`create`: each submission is a new object named by the server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pykueue.standalone.http import apply_parsing, applying
from pykueue.store.sqlite import SQLiteStore

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  template:
    spec:
      containers:
      - {name: c, image: busybox, resources: {requests: {cpu: "1"}}}
      restartPolicy: Never
"""


def test_generate_name_creates_a_new_named_job_each_time(tmp_path: Path) -> None:
    async def submit_twice() -> list[str]:
        store = SQLiteStore(tmp_path / "state.db")
        names = []
        for _ in range(2):
            docs = apply_parsing.validate(apply_parsing.decode([("job.yaml", JOB)]))
            result = await applying.store_all(store, docs)
            names.append(result.actions[0]["name"])
            assert result.actions[0]["action"] == "created"
        jobs, _ = await store.list("Job", "default")
        assert sorted(j["metadata"]["name"] for j in jobs) == sorted(names)
        return names

    first, second = asyncio.run(submit_twice())
    assert first != second
    for name in (first, second):
        assert name.startswith("sample-job-") and len(name) == len("sample-job-") + 5


def test_a_job_applied_again_with_its_requests_spelled_otherwise_is_unchanged(tmp_path: Path) -> None:
    named = JOB.replace("generateName: sample-job-", "name: sample-job")

    async def apply_twice() -> list[str]:
        store = SQLiteStore(tmp_path / "state.db")
        actions = []
        for text in (named, named.replace('cpu: "1"', "cpu: 1000m")):
            docs = apply_parsing.validate(apply_parsing.decode([("job.yaml", text)]))
            actions.append((await applying.store_all(store, docs)).actions[0]["action"])
        return actions

    assert asyncio.run(apply_twice()) == ["created", "unchanged"]
