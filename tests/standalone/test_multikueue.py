"""MultiKueue between standalone servers: one real `pykueue up` manager, two real worker servers.

Each server has its own data folder (its own SQLite file), port and socket; the manager
reaches the workers over HTTP with a tenant token of each, named by a worker file that its
MultiKueueClusters point at. Jobs are real processes on the workers; the manager runs none.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .helpers import Server, job, jobset, marked_processes, wait_until

NAMESPACE = "team-a"
API = "kueue.x-k8s.io/v1beta2"


def _queues(cpu: str, check: bool = False) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    if check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": "multikueue"}]}
    return [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec},
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def _config(
    tmp_path: Path, name: str, docs: list[dict[str, Any]], extra: dict[str, Any] | None = None
) -> Path:
    folder = tmp_path / f"{name}-cfg"
    folder.mkdir()
    (folder / "queues.yaml").write_text(yaml.safe_dump_all(docs))
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"manifests": ["queues.yaml"], **(extra or {})}))
    return path


def _worker_file(tmp_path: Path, name: str, worker: Server) -> Path:
    """A tenant identity for the manager on the worker, and the file the manager reads it from."""
    created = worker.api(
        "POST", "/api/v1/identities", json={"name": "manager", "role": "tenant", "namespaces": [NAMESPACE]}
    )
    path = tmp_path / f"{name}.worker.yaml"
    path.write_text(yaml.safe_dump({"server": worker.url, "token": created["token"]}))
    return path


def _manager_docs(files: dict[str, Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": API,
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Path", "location": str(path)}}},
        }
        for name, path in files.items()
    ]
    docs += [
        {
            "apiVersion": API,
            "kind": "MultiKueueConfig",
            "metadata": {"name": "workers"},
            "spec": {"clusters": list(files)},
        },
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": "multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"},
            },
        },
    ]
    # team-b is the manager's alone: no worker grants the manager that namespace.
    other = {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": "team-b"},
        "spec": {"clusterQueue": "cq"},
    }
    return [*docs, *_queues("10", check=True), other]


def _lab(tmp_path: Path, start_server: Callable[..., Server]) -> tuple[Server, dict[str, Server]]:
    """Two workers with 2 CPUs of quota each and a manager with 10 in front of them."""
    workers = {
        name: start_server(_config(tmp_path, name, _queues("2")), name=name)
        for name in ("worker1", "worker2")
    }
    files = {name: _worker_file(tmp_path, name, server) for name, server in workers.items()}
    manager = start_server(
        _config(tmp_path, "manager", _manager_docs(files), {"multiKueue": {"workerLostTimeout": "3s"}}),
        name="manager",
    )
    return manager, workers


def _workload(server: Server, job_name: str) -> dict[str, Any] | None:
    rows = [r for r in server.api("GET", "/api/v1/workloads") if r["job"] == job_name]
    return rows[0] if rows else None


def _worker_of(server: Server, job_name: str) -> str:
    row = _workload(server, job_name)
    return str(row["worker"]) if row is not None else ""


def _job(server: Server, name: str) -> dict[str, Any] | None:
    return server.jobs().get(f"{NAMESPACE}/{name}")


def _check_state(server: Server, job_name: str) -> str:
    for wl in server.api("GET", f"/api/v1/objects/Workload?namespace={NAMESPACE}"):
        owners = wl["metadata"].get("ownerReferences") or []
        if owners and owners[0]["name"] == job_name:
            checks = (wl.get("status") or {}).get("admissionChecks") or []
            return str(checks[0].get("state")) if checks else ""
    return ""


def test_a_job_runs_on_the_worker_that_admits_it_first_and_its_status_comes_back(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    manager, workers = _lab(tmp_path, start_server)
    # worker1 is full with a job of its own: its copy waits there, so worker2 must win.
    local = job("hog", "sleep 120", namespace=NAMESPACE, cpu="2")
    assert workers["worker1"].apply([local]).status_code == 200
    wait_until(lambda: (_job(workers["worker1"], "hog") or {}).get("state") == "Running")

    def active(name: str) -> bool:
        cluster = manager.api("GET", f"/api/v1/objects/MultiKueueCluster/_/{name}")
        conditions = (cluster.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)

    wait_until(lambda: active("worker1") and active("worker2"))

    # Submitted as any job: no managedBy given, the manager's apply hands it to MultiKueue.
    hello = job("hello", 'echo "hello from $PYKUEUE_JOB"; sleep 8', namespace=NAMESPACE, cpu="1")
    response = manager.apply([hello])
    assert response.status_code == 200, response.text
    stored = manager.api("GET", f"/api/v1/objects/Job/{NAMESPACE}/hello")
    assert stored["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"

    assert wait_until(lambda: _worker_of(manager, "hello")) == "worker2"
    assert _check_state(manager, "hello") == "Ready"
    # The loser's copy goes; the winner's runs as the manager's tenant identity there.
    wait_until(lambda: _job(workers["worker1"], "hello") is None)
    copy_ = wait_until(lambda: _job(workers["worker2"], "hello"))
    assert copy_["submittedBy"] == "manager"
    # Running is mirrored onto the manager's job while it runs on worker2.
    wait_until(lambda: (_job(manager, "hello") or {}).get("state") == "Running")
    assert marked_processes(manager.db) == []  # the manager runs nothing itself
    described = manager.cli("describe", "workload", "hello", "-n", NAMESPACE).stdout
    assert "Worker:    worker2 (MultiKueue)" in described, described
    listed = manager.cli("get", "workloads", "-n", NAMESPACE).stdout
    assert "WORKER" in listed and "worker2" in listed, listed
    assert "hello from hello" in wait_until(lambda: manager.cli("logs", "hello", "-n", NAMESPACE).stdout)

    finished = wait_until(
        lambda: (_job(manager, "hello") or {}).get("state") == "Succeeded" and _job(manager, "hello")
    )
    assert finished["succeeded"] == 1
    wait_until(lambda: (_workload(manager, "hello") or {}).get("state") == "Finished")
    # Finished work is collected from the worker; its logs stay readable on the manager.
    wait_until(lambda: _job(workers["worker2"], "hello") is None)
    logs = manager.cli("logs", "hello", "-n", NAMESPACE)
    assert logs.returncode == 0 and "hello from hello" in logs.stdout, logs.stderr
    wait_until(lambda: manager.api("GET", "/api/v1/clusterqueues")[0]["admitted"] == 0)

    # Deleting the manager's job deletes its copy, and the copy's process with it.
    long = job("long", "sleep 120", namespace=NAMESPACE, cpu="1")
    assert manager.apply([long]).status_code == 200
    wait_until(lambda: (_job(workers["worker2"], "long") or {}).get("state") == "Running")
    assert manager.cli("delete", "job", "long", "-n", NAMESPACE).returncode == 0
    wait_until(lambda: _job(workers["worker2"], "long") is None)
    assert _job(workers["worker1"], "long") is None
    # A job that fails on its worker fails on the manager, and its quota there is released.
    broken = job("broken", "exit 3", namespace=NAMESPACE, cpu="1", backoff_limit=0)
    assert manager.apply([broken]).status_code == 200
    wait_until(lambda: (_job(manager, "broken") or {}).get("state") == "Failed")
    wait_until(lambda: (_workload(manager, "broken") or {}).get("state") == "Failed")
    wait_until(lambda: manager.api("GET", "/api/v1/clusterqueues")[0]["admitted"] == 0)

    # A job every worker refuses waits on the manager, and describe says what the workers said.
    assert manager.apply([job("elsewhere", "true", namespace="team-b", cpu="1")]).status_code == 200

    def refused() -> str:
        text = manager.cli("describe", "workload", "elsewhere", "-n", "team-b").stdout
        return text if "no worker takes the job" in text else ""

    said = wait_until(refused)
    assert "worker1:" in said and "worker2:" in said, said
    assert "may only submit to namespaces team-a" in said, said
    assert (_job(manager, "elsewhere") or {"state": ""})["state"] in ("", "Queued")

    # The hog on worker1 was never touched.
    assert (_job(workers["worker1"], "hog") or {}).get("state") == "Running"
    # Every removal went through: a Workload the worker had deleted with its job is no failure.
    failures = [e["message"] for e in manager.api("GET", "/api/v1/events") if "cannot delete" in e["message"]]
    assert failures == []


def test_a_killed_worker_loses_its_job_to_the_other_and_its_stale_copy_goes_when_it_returns(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    manager, workers = _lab(tmp_path, start_server)
    assert manager.apply([job("train", "sleep 300", namespace=NAMESPACE, cpu="1")]).status_code == 200
    first = wait_until(lambda: _worker_of(manager, "train"))
    other = "worker2" if first == "worker1" else "worker1"
    wait_until(lambda: (_job(workers[first], "train") or {}).get("state") == "Running")
    wait_until(lambda: (_job(manager, "train") or {}).get("state") == "Running")

    workers[first].kill()  # kill -9 the worker's server, by its PID
    # After workerLostTimeout (3 s) the job is evicted on the manager and dispatched again.
    assert wait_until(lambda: _worker_of(manager, "train") == other, timeout=60)
    wait_until(lambda: (_job(workers[other], "train") or {}).get("state") == "Running")
    wait_until(lambda: (_job(manager, "train") or {}).get("state") == "Running")

    workers[first].start()  # same data folder, port and tokens
    # Its stale copy is deleted once the manager reaches it again; the other keeps running.
    wait_until(lambda: _job(workers[first], "train") is None, timeout=60)
    assert (_job(workers[other], "train") or {}).get("state") == "Running"
    assert _worker_of(manager, "train") == other


def test_a_worker_the_manager_cannot_use_is_inactive_with_the_field_named(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    missing = tmp_path / "nowhere.yaml"
    docs = [
        {
            "apiVersion": API,
            "kind": "MultiKueueCluster",
            "metadata": {"name": "secret"},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "gpu1"}}},
        },
        {
            "apiVersion": API,
            "kind": "MultiKueueCluster",
            "metadata": {"name": "missing"},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Path", "location": str(missing)}}},
        },
        {
            "apiVersion": API,
            "kind": "MultiKueueConfig",
            "metadata": {"name": "workers"},
            "spec": {"clusters": ["secret", "missing"]},
        },
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": "multikueue"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"},
            },
        },
        *_queues("4", check=True),
    ]
    manager = start_server(_config(tmp_path, "manager", docs), name="manager")

    def condition(kind: str, name: str) -> dict[str, Any] | None:
        obj = manager.api("GET", f"/api/v1/objects/{kind}/_/{name}")
        return next(
            (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Active"), None
        )

    secret = wait_until(lambda: condition("MultiKueueCluster", "secret"))
    assert (secret["status"], secret["reason"]) == ("False", "BadConfig")
    assert "spec.clusterSource.kubeConfig.locationType must be Path" in secret["message"]
    gone = wait_until(lambda: condition("MultiKueueCluster", "missing"))
    assert gone["reason"] == "BadConfig" and str(missing) in gone["message"]
    check = wait_until(lambda: condition("AdmissionCheck", "multikueue"))
    assert (check["status"], check["reason"]) == ("False", "NoUsableClusters")
    # With no usable worker the ClusterQueue is inactive: a job waits there, and says why.
    assert manager.apply([job("waits", "sleep 1", namespace=NAMESPACE)]).status_code == 200

    # (An explanation is there as soon as the job is; the engine's reasons once it read the Workload.)
    def read() -> dict[str, Any] | None:
        found = manager.explanation(NAMESPACE, "waits")
        return found if found is not None and found["state"] != "Unknown" else None

    explanation = wait_until(read)
    assert "multikueue" in str(explanation["reasons"]), explanation
    assert (_job(manager, "waits") or {}).get("state") == "Queued"


def test_a_manager_killed_and_restarted_follows_the_copy_it_left_running(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    manager, workers = _lab(tmp_path, start_server)
    assert manager.apply([job("steady", "sleep 12", namespace=NAMESPACE, cpu="1")]).status_code == 200
    chosen = wait_until(lambda: _worker_of(manager, "steady"))
    other = "worker2" if chosen == "worker1" else "worker1"
    wait_until(lambda: (_job(manager, "steady") or {}).get("state") == "Running")
    wait_until(lambda: _job(workers[other], "steady") is None)

    manager.kill()  # kill -9, by its PID
    manager.start()
    # The restarted manager follows the same copy to its end: no new dispatch, nothing run twice.
    wait_until(lambda: (_job(manager, "steady") or {}).get("state") == "Succeeded", timeout=60)
    assert _worker_of(manager, "steady") == chosen
    assert _job(workers[other], "steady") is None
    wait_until(lambda: _job(workers[chosen], "steady") is None)  # collected once finished
    # Its one pod started once on its worker: the restart neither dispatched it again nor restarted it.
    starts = [
        e
        for e in workers[chosen].api("GET", "/api/v1/events")
        if "steady: pod steady-0 started" in e["message"]
    ]
    assert len(starts) == 1, starts


def test_a_multikueue_jobsets_logs_are_read_from_its_worker(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    manager, workers = _lab(tmp_path, start_server)
    wait_until(lambda: all(_worker_file_active(manager, name) for name in workers))
    ddp = jobset("ddp", [("node", 1, 1, 'echo "rank $PYKUEUE_JOB"; sleep 60', 0)], namespace=NAMESPACE)
    ddp["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    response = manager.apply([ddp])
    assert response.status_code == 200, response.text
    worker = wait_until(lambda: _worker_of(manager, "ddp"))
    wait_until(lambda: (_job(workers[worker], "ddp") or {}).get("state") == "Running")
    # Read from the worker while it runs: the manager has none of its own.
    said = wait_until(lambda: manager.cli("logs", "ddp", "-n", NAMESPACE).stdout)
    assert "rank" in said, said


def _worker_file_active(manager: Server, name: str) -> bool:
    cluster = manager.api("GET", f"/api/v1/objects/MultiKueueCluster/_/{name}")
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)
