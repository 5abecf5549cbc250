"""Several clusters behind one MultiKueue: who runs what, when, and what each cluster's quota did.

Every test writes the manager's and the workers' designs as files, loads them as
`pykueue simulate --queues ... --cluster NAME=PATH` does, and simulates with the
real engine on every cluster. The expected times are worked out by hand in the
comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pykueue.cli.main import app
from pykueue.sim import driver, federation, simulation, trace
from pykueue.sim.design import Design
from pykueue.sim.trace import TraceError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim" / "multikueue"
HEADER = "name,submit,queue,priority,runtime,checkpoint,count,requests\n"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"


def _queue(name: str, cpu: str, flavor: str = "default", checks: str = "") -> str:
    strategy = f"  admissionChecksStrategy:\n    admissionChecks: [{{name: {checks}}}]\n" if checks else ""
    return f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}
{strategy}  preemption: {{withinClusterQueue: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: {flavor}
      resources:
      - {{name: cpu, nominalQuota: "{cpu}"}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: main, namespace: team}}
spec: {{clusterQueue: {name}}}
"""


def _manager(
    workers: list[str],
    cpu: str = "100",
    order: list[str] | None = None,
    dispatcher: str = "",
    config: str = "workers",
) -> str:
    docs = [
        f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {{name: {name}}}
spec:
  clusterSource:
    kubeConfig: {{location: {name}-kubeconfig}}
"""
        for name in workers
    ]
    docs.append(
        f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {{name: workers}}
spec:
  clusters: [{", ".join(order or workers)}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {{name: multikueue}}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {{apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: {config}}}
"""
    )
    docs.append(_queue("cq", cpu, checks="multikueue"))
    if dispatcher:
        docs.append(
            "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
            f"multiKueue: {{dispatcherName: {dispatcher}}}\n"
        )
    return "---\n".join(docs)


def _write(tmp_path: Path, manager: str, workers: dict[str, str]) -> tuple[Path, list[str]]:
    path = tmp_path / "manager.yaml"
    path.write_text(manager)
    options = []
    for name, text in workers.items():
        worker = tmp_path / f"{name}.yaml"
        worker.write_text(text)
        options.append(f"{name}={worker}")
    return path, options


def _run(
    tmp_path: Path, manager: str, workers: dict[str, str], csv_text: str, latency: int = 0
) -> tuple[driver.Run, dict]:
    path, options = _write(tmp_path, manager, workers)
    design = Design.load(path)
    federation.attach(design, federation.load_workers(options))
    jobs = design.check(trace.parse_csv(csv_text, "trace.csv"))
    run = simulation.simulate(design, jobs, driver.Options(dispatch_latency=latency))
    return run, run.summary("trace.csv")


def _job(run: driver.Run, name: str) -> dict:
    rec = run.recorder
    assert run.clusters is not None
    i = next(k for k, job in enumerate(rec.jobs) if job.name == name)
    return {
        "first": rec.first_admit[i] / 1e6,
        "finish": rec.finish[i] / 1e6,
        "site": run.clusters.site[i],
        "evictions": rec.evictions[i],
    }


TWO_WORKERS = {"w1": _queue("cq", "4"), "w2": _queue("cq", "4")}


def test_a_full_worker_sends_the_job_to_the_other(tmp_path: Path):
    # a fills w1 (the tie at t=0 goes to w1, first in the config); b at 10 s finds w1 full and
    # runs on w2; c at 20 s finds both full and waits on both until w2 frees at 60 s.
    csv_text = (
        HEADER + "a,0,team/main,0,100,,1,cpu=4\nb,10,team/main,0,50,,1,cpu=4\nc,20,team/main,0,10,,1,cpu=4\n"
    )
    run, summary = _run(tmp_path, _manager(["w1", "w2"]), TWO_WORKERS, csv_text)
    assert _job(run, "a") == {"first": 0, "finish": 100, "site": "w1", "evictions": 0}
    assert _job(run, "b") == {"first": 10, "finish": 60, "site": "w2", "evictions": 0}
    assert _job(run, "c") == {"first": 60, "finish": 70, "site": "w2", "evictions": 0}
    workers = summary["multiKueue"]["workers"]
    assert (workers["w1"]["finished"], workers["w2"]["finished"]) == (1, 2)
    # every job sent to both; each worker lost the race for the others' jobs
    assert (workers["w1"]["copies"], workers["w1"]["copiesWithdrawn"]) == (3, 2)
    assert (workers["w2"]["copies"], workers["w2"]["copiesWithdrawn"]) == (3, 1)
    # the manager's quota (100 CPUs) never holds anyone back: c waited 40 s for a worker
    split = summary["multiKueue"]
    assert split["managerWait"]["max"] == 0
    assert split["workerWait"]["max"] == 40
    assert workers["w2"]["workerWait"]["max"] == 40


def test_per_cluster_usage_adds_up_to_the_work_done(tmp_path: Path):
    csv_text = (
        HEADER + "a,0,team/main,0,100,,1,cpu=4\nb,10,team/main,0,50,,1,cpu=4\nc,20,team/main,0,10,,1,cpu=4\n"
    )
    _, summary = _run(tmp_path, _manager(["w1", "w2"]), TWO_WORKERS, csv_text)
    clusters = summary["multiKueue"]
    w1 = clusters["workers"]["w1"]["usage"]["default/cpu"]
    w2 = clusters["workers"]["w2"]["usage"]["default/cpu"]
    # makespan 100 s: w1 ran a (4 CPUs x 100 s), w2 ran b and c (4 x 50 + 4 x 10)
    assert summary["totals"]["makespanSeconds"] == 100
    assert w1["percentOfCapacity"] == 100.0
    assert w2["percentOfCapacity"] == 60.0
    assert w1["usedResourceHours"] + w2["usedResourceHours"] == pytest.approx(4 * 160 / 3600, abs=1e-4)
    assert w1["capacity"] == w2["capacity"] == 4
    # the manager reserves from its reservation to the job's end: a 0-100, b 10-60, c 20-70
    manager = clusters["manager"]["usage"]["default/cpu"]
    assert manager["usedResourceHours"] == pytest.approx(4 * 200 / 3600, abs=1e-4)
    assert manager["percentOfCapacity"] == 8.0
    assert clusters["workersPrimaryPercentOfCapacity"] == 80.0


def test_the_config_order_breaks_a_tie(tmp_path: Path):
    csv_text = HEADER + "a,0,team/main,0,100,,1,cpu=4\n"
    run, _ = _run(tmp_path, _manager(["w1", "w2"], order=["w2", "w1"]), TWO_WORKERS, csv_text)
    assert _job(run, "a")["site"] == "w2"


def test_the_manager_quota_holds_jobs_back_before_any_worker_sees_them(tmp_path: Path):
    # The manager lets 4 CPUs through at once: b waits at the manager until a ends, then
    # starts at once on a worker. The wait is the manager's, not a worker's.
    csv_text = HEADER + "a,0,team/main,0,100,,1,cpu=4\nb,10,team/main,0,50,,1,cpu=4\n"
    run, summary = _run(tmp_path, _manager(["w1", "w2"], cpu="4"), TWO_WORKERS, csv_text)
    assert _job(run, "b") == {"first": 100, "finish": 150, "site": "w1", "evictions": 0}
    split = summary["multiKueue"]
    assert split["managerWait"]["max"] == 90
    assert split["workerWait"]["max"] == 0
    # b reached no worker before the manager reserved for it
    assert summary["multiKueue"]["workers"]["w2"]["copies"] == 2


def test_dispatch_latency_delays_every_start(tmp_path: Path):
    csv_text = HEADER + "a,0,team/main,0,100,,1,cpu=4\n"
    run, summary = _run(tmp_path, _manager(["w1", "w2"]), TWO_WORKERS, csv_text, latency=5_000_000)
    assert _job(run, "a") == {"first": 5, "finish": 105, "site": "w1", "evictions": 0}
    assert summary["multiKueue"]["workerWait"]["max"] == 5
    assert summary["multiKueue"]["dispatchLatencySeconds"] == 5


@pytest.mark.parametrize(
    ("dispatcher", "fourth_starts"),
    [
        ("", 0),  # AllAtOnce: every worker gets each job at once, one job each at t=0
        (INCREMENTAL, 300),  # the first 3 workers by name; w4 gets copies after a 5 min round
    ],
)
def test_all_at_once_and_incremental(tmp_path: Path, dispatcher: str, fourth_starts: int):
    names = ["w1", "w2", "w3", "w4"]
    workers = {name: _queue("cq", "4") for name in names}
    csv_text = HEADER + "".join(f"j{k},0,team/main,0,1000,,1,cpu=4\n" for k in range(4))
    run, summary = _run(tmp_path, _manager(names, dispatcher=dispatcher), workers, csv_text)
    starts = sorted(_job(run, f"j{k}")["first"] for k in range(4))
    assert starts == [0, 0, 0, fourth_starts]
    assert sorted(_job(run, f"j{k}")["site"] for k in range(4)) == names
    assert summary["multiKueue"]["dispatcher"] == ("Incremental" if dispatcher else "AllAtOnce")
    # Incremental: w4 never saw the three jobs that won before its round came
    copies = summary["multiKueue"]["workers"]["w4"]["copies"]
    assert copies == (1 if dispatcher else 4)


def test_a_manager_preemption_withdraws_the_copy_and_frees_the_worker(tmp_path: Path):
    # lo runs on w1 from 0; hi (priority 10) arrives at 10 and the manager (4 CPUs) preempts lo:
    # lo's copy leaves w1, whose 4 CPUs go to hi at once; lo starts over when hi ends at 60.
    csv_text = HEADER + "lo,0,team/main,0,100,,1,cpu=4\nhi,10,team/main,10,50,,1,cpu=4\n"
    workers = {"w1": _queue("cq", "4")}
    run, summary = _run(tmp_path, _manager(["w1"], cpu="4"), workers, csv_text)
    assert _job(run, "hi") == {"first": 10, "finish": 60, "site": "w1", "evictions": 0}
    assert _job(run, "lo") == {"first": 0, "finish": 160, "site": "w1", "evictions": 1}
    clusters = summary["multiKueue"]
    assert clusters["manager"]["preemptions"] == 1
    assert clusters["workers"]["w1"]["preemptions"] == 0
    # w1 held lo 0-10 and 60-160, hi 10-60: never both at once
    assert clusters["workers"]["w1"]["usage"]["default/cpu"]["percentOfCapacity"] == 100.0


def test_a_worker_preemption_requeues_on_that_worker(tmp_path: Path):
    # w1 prefers hi: it preempts lo there, while the manager (8 CPUs) holds both. lo keeps its
    # checkpoint at 10 s of progress and runs its last 90 s on w1 once hi is done.
    csv_text = HEADER + "lo,0,team/main,0,100,10,1,cpu=4\nhi,15,team/main,10,50,,1,cpu=4\n"
    workers = {"w1": _queue("cq", "4")}
    run, summary = _run(tmp_path, _manager(["w1"], cpu="8"), workers, csv_text)
    assert _job(run, "hi") == {"first": 15, "finish": 65, "site": "w1", "evictions": 0}
    assert _job(run, "lo") == {"first": 0, "finish": 155, "site": "w1", "evictions": 1}
    assert summary["multiKueue"]["workers"]["w1"]["preemptions"] == 1
    assert summary["multiKueue"]["manager"]["preemptions"] == 0
    assert summary["totals"]["lostResourceHours"]["cpu"] == pytest.approx(4 * 5 / 3600, abs=1e-4)


def test_a_queue_without_the_check_runs_on_the_manager(tmp_path: Path):
    manager = _manager(["w1"]) + "---\n" + _queue("local", "4").replace("name: main", "name: here")
    csv_text = HEADER + "a,0,team/main,0,10,,1,cpu=4\nb,0,team/here,0,10,,1,cpu=4\n"
    run, summary = _run(tmp_path, manager, {"w1": _queue("cq", "4")}, csv_text)
    assert _job(run, "a")["site"] == "w1"
    assert _job(run, "b") == {"first": 0, "finish": 10, "site": "manager", "evictions": 0}
    assert summary["multiKueue"]["manager"]["finished"] == 1


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    return result.exit_code, result.output


def _example_args() -> list[str]:
    return [
        "--queues",
        str(EXAMPLE / "manager.yaml"),
        "--cluster",
        f"worker1={EXAMPLE / 'workers' / 'worker1.yaml'}",
        "--cluster",
        f"worker2={EXAMPLE / 'workers' / 'worker2.yaml'}",
        "--trace",
        str(EXAMPLE / "trace.csv"),
    ]


@pytest.mark.parametrize("extra", [[], ["--outage", "worker2=30m..2h"]])
def test_the_example_gives_the_same_bytes_twice(tmp_path: Path, extra: list[str]):
    outputs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        code, _ = _cli("simulate", *_example_args(), "--dispatch-latency", "2s", *extra, "--out", str(out))
        assert code == 0
        outputs.append(
            {name: (out / name).read_bytes() for name in ("summary.json", "jobs.csv", "report.html")}
        )
    assert outputs[0] == outputs[1]
    summary = json.loads(outputs[0]["summary.json"])
    workers = summary["multiKueue"]["workers"]
    assert summary["totals"]["finished"] == 40
    ran = workers["worker1"]["finished"] + workers["worker2"]["finished"]
    lost = workers["worker2"]["lostToTimeout"]
    if not extra:
        assert (ran, lost) == (40, 0)
    else:  # a job given up on worker2 may still have ended there, unseen: it then ran twice
        assert lost > 0 and 40 <= ran <= 40 + lost
    assert b"Clusters (MultiKueue)" in outputs[0]["report.html"]
    header = outputs[0]["jobs.csv"].decode().splitlines()[0]
    assert header.endswith(",cluster")


def test_plan_compares_two_and_three_workers(tmp_path: Path):
    code, output = _cli(
        "plan",
        "--queues",
        str(EXAMPLE / "manager.yaml"),
        "--queues",
        str(EXAMPLE / "manager-3.yaml"),
        *[f"--cluster=worker{k}={EXAMPLE / 'workers' / f'worker{k}.yaml'}" for k in (1, 2, 3)],
        "--trace",
        str(EXAMPLE / "trace.csv"),
        "--seeds",
        "1",
        "--out",
        str(tmp_path),
    )
    assert code == 0, output
    two = json.loads((tmp_path / "summary-manager.json").read_text())
    three = json.loads((tmp_path / "summary-manager-3.json").read_text())
    assert list(two["multiKueue"]["workers"]) == ["worker1", "worker2"]
    assert list(three["multiKueue"]["workers"]) == ["worker1", "worker2", "worker3"]
    assert three["totals"]["wait"]["mean"] < two["totals"]["wait"]["mean"]
    assert "mean wait for a worker" in output


def _bad(tmp_path: Path, manager: str, workers: dict[str, str], csv_text: str, *extra: str) -> str:
    path, options = _write(tmp_path, manager, workers)
    (tmp_path / "trace.csv").write_text(csv_text)
    args = ["simulate", "--queues", str(path), "--trace", str(tmp_path / "trace.csv"), *extra]
    for option in options:
        args += ["--cluster", option]
    code, output = _cli(*args)
    assert code == 2, output
    assert "Traceback" not in output
    return " ".join(output.split())


ONE_JOB = HEADER + "a,0,team/main,0,10,,1,cpu=4\n"


@pytest.mark.parametrize(
    ("manager", "workers", "expected"),
    [
        (
            _manager(["w1", "w2"]),
            {"w1": _queue("cq", "4")},
            "design manager: MultiKueueCluster w2 has no worker design: give --cluster w2=FOLDER",
        ),
        (
            _manager(["w1"]),
            {"w1": _queue("cq", "4"), "w9": _queue("cq", "4")},
            "--cluster w9: design manager has no MultiKueueCluster w9 (it has: w1)",
        ),
        (
            _manager(["w1"], order=["w1", "w2"]),
            {"w1": _queue("cq", "4")},
            "MultiKueueConfig workers spec.clusters[1]: no MultiKueueCluster w2 in the design",
        ),
        (
            _manager(["w1"], config="nowhere"),
            {"w1": _queue("cq", "4")},
            "AdmissionCheck multikueue spec.parameters: no MultiKueueConfig nowhere in the design",
        ),
        (
            _manager(["w1"], dispatcher="example.com/mine"),
            {"w1": _queue("cq", "4")},
            "multiKueue.dispatcherName: example.com/mine is an external dispatcher",
        ),
        (
            _manager(["w1"]),
            {"w1": _manager(["w2"])},
            "worker w1 holds MultiKueueCluster, MultiKueueConfig",
        ),
        (
            _manager(["w1", "w2"]),
            {"w1": _queue("cq", "4"), "w2": _queue("cq", "4").replace("name: main", "name: other")},
            "trace.csv:2 queue: worker w2: LocalQueue team/main is not in the design (known: team/other)",
        ),
        (
            _manager(["w1", "w2"]),
            {"w1": _queue("cq", "2"), "w2": _queue("cq", "3")},
            "trace.csv:2 requests: no worker can ever run it: w1 (needs 4 cpu",
        ),
    ],
)
def test_bad_designs_are_named(tmp_path: Path, manager: str, workers: dict[str, str], expected: str):
    assert expected in _bad(tmp_path, manager, workers, ONE_JOB)


def test_cluster_options_need_a_manager_and_the_right_form(tmp_path: Path):
    plain = tmp_path / "plain.yaml"
    plain.write_text(_queue("cq", "4"))
    (tmp_path / "trace.csv").write_text(ONE_JOB)
    common = ["simulate", "--queues", str(plain), "--trace", str(tmp_path / "trace.csv")]
    code, output = _cli(*common, "--cluster", f"w1={plain}")
    assert code == 2 and "design plain has no MultiKueueCluster" in output
    code, output = _cli(*common, "--cluster", "w1")
    assert code == 2 and "--cluster w1: expected NAME=PATH" in output
    code, output = _cli(*common, "--dispatch-latency", "1s")
    assert code == 2 and "no design has MultiKueue workers" in output


def test_a_manager_without_its_workers_is_refused(tmp_path: Path):
    message = _bad(tmp_path, _manager(["w1"]), {}, ONE_JOB)
    assert "MultiKueueCluster w1 has no worker design" in message


def test_a_cycle_time_is_refused_with_clusters(tmp_path: Path):
    message = _bad(tmp_path, _manager(["w1"]), {"w1": _queue("cq", "4")}, ONE_JOB, "--cycle-time", "10ms")
    assert "--cycle-time: a cycle time is not modelled with several clusters" in message


def test_a_job_a_worker_cannot_hold_still_runs_on_one_that_can(tmp_path: Path):
    # w1 is too small for a; w2 is not: the job is valid and runs on w2, its w1 copy withdrawn.
    workers = {"w1": _queue("cq", "2"), "w2": _queue("cq", "4")}
    run, summary = _run(tmp_path, _manager(["w1", "w2"]), workers, ONE_JOB)
    assert _job(run, "a")["site"] == "w2"
    assert summary["multiKueue"]["workers"]["w1"]["copiesWithdrawn"] == 1
    with pytest.raises(TraceError):
        _run(tmp_path, _manager(["w1"]), {"w1": _queue("cq", "2")}, ONE_JOB)


def _run_outage(
    tmp_path: Path, csv_text: str, outages: tuple[tuple[str, int, int], ...]
) -> tuple[driver.Run, dict]:
    path, options = _write(tmp_path, _manager(["w1", "w2"]), TWO_WORKERS)
    design = Design.load(path)
    federation.attach(design, federation.load_workers(options))
    jobs = design.check(trace.parse_csv(csv_text, "trace.csv"))
    run = simulation.simulate(design, jobs, driver.Options(outages=outages))
    return run, run.summary("trace.csv")


S = 1_000_000


def test_a_lost_worker_s_job_is_dispatched_again_after_worker_lost_timeout(tmp_path: Path):
    # a wins w1 at 0; w1 is out of reach from 100 s to 5000 s. After the default 15 min
    # (at 1000 s) the manager gives up on w1: a restarts on w2 (no checkpoint: 1000 s lost)
    # and ends at 4600. Its run on w1 goes on, unseen, to its own end at 3600 s.
    csv_text = HEADER + "a,0,team/main,0,3600,,1,cpu=4\n"
    run, summary = _run_outage(tmp_path, csv_text, (("w1", 100 * S, 5000 * S),))
    job = _job(run, "a")
    assert job == {"first": 0, "finish": 4600, "site": "w2", "evictions": 1}
    assert run.recorder.last_admit[0] == 1000 * S
    assert run.recorder.lost_time[0] == 1000 * S
    workers = summary["multiKueue"]["workers"]
    assert workers["w1"]["lostToTimeout"] == 1
    # w1 held a's 4 CPUs 0-3600 s (the run left behind), w2 1000-4600 s: makespan 4600 s
    assert workers["w1"]["usage"]["default/cpu"]["usedResourceHours"] == pytest.approx(
        4 * 3600 / 3600, abs=1e-4
    )
    assert workers["w2"]["usage"]["default/cpu"]["usedResourceHours"] == pytest.approx(
        4 * 3600 / 3600, abs=1e-4
    )
    assert summary["multiKueue"]["outages"] == [{"worker": "w1", "startSeconds": 100, "endSeconds": 5000}]
    assert summary["preemptionsByPreemptor"][0]["reasons"] == {"MultiKueueWorkerLost": 1}


def test_a_short_outage_restarts_nothing(tmp_path: Path):
    # w1 is out of reach 100-1000 s, less than workerLostTimeout: a ends there at 500 s, which the
    # manager learns at 1000 s; b (at 200 s) is sent to w2 only, and w1 never gets a copy of it.
    csv_text = HEADER + "a,0,team/main,0,500,,1,cpu=4\nb,200,team/main,0,100,,1,cpu=2\n"
    run, summary = _run_outage(tmp_path, csv_text, (("w1", 100 * S, 1000 * S),))
    assert _job(run, "a") == {"first": 0, "finish": 1000, "site": "w1", "evictions": 0}
    assert _job(run, "b") == {"first": 200, "finish": 300, "site": "w2", "evictions": 0}
    workers = summary["multiKueue"]["workers"]
    assert workers["w1"]["copies"] == 1
    assert workers["w1"]["lostToTimeout"] == 0
    # w1's quota was free again from a's real end at 500 s
    assert workers["w1"]["usage"]["default/cpu"]["usedResourceHours"] == pytest.approx(
        4 * 500 / 3600, abs=1e-4
    )


@pytest.mark.parametrize(
    ("outage", "expected"),
    [
        ("w1", "--outage w1: expected NAME=START..END"),
        ("w1=2h..1h", "--outage w1=2h..1h: the end must come after the start"),
        ("w1=x..1h", "--outage w1=x..1h: START: expected seconds or a duration"),
        ("w7=0..1h", "--outage w7=0..1h: no worker w7 (workers: w1, w2)"),
    ],
)
def test_bad_outages_are_named(tmp_path: Path, outage: str, expected: str):
    assert expected in _bad(tmp_path, _manager(["w1", "w2"]), TWO_WORKERS, ONE_JOB, "--outage", outage)


@pytest.mark.parametrize("outages", [(), (("worker2", 1800 * S, 7200 * S), ("worker1", 3000 * S, 3100 * S))])
def test_no_quota_is_left_held_anywhere_at_the_end(outages: tuple[tuple[str, int, int], ...]):
    design = Design.load(EXAMPLE / "manager.yaml")
    pool = {f"worker{k}": Design.load(EXAMPLE / "workers" / f"worker{k}.yaml", f"worker{k}") for k in (1, 2)}
    federation.attach(design, pool)
    jobs = design.check(trace.load(EXAMPLE / "trace.csv", []))
    run = simulation.simulate(design, jobs, driver.Options(outages=outages, dispatch_latency=3 * S))
    assert run.clusters is not None
    assert run.recorder.finish.count(-1) == 0
    for record in run.clusters.records():
        assert record.in_use == {}, f"{record.name} still holds {record.in_use}"
        assert record.primary_in_use[-1] == 0


def test_a_limited_job_behind_multikueue_is_refused_by_name(tmp_path: Path):
    limited = (
        "name,submit,queue,priority,runtime,maxExecutionTime,count,requests\na,0,team/main,0,10,60,1,cpu=4\n"
    )
    output = _bad(tmp_path, _manager(["w1"]), {"w1": _queue("cq", "4")}, limited)
    assert "trace.csv:2 maxExecutionTime: not simulated for a job sent to MultiKueue workers (yet)" in output


def test_an_outage_after_a_job_ended_on_that_worker_keeps_the_job_finished(tmp_path: Path):
    # a ends on w1 at 500 s, seen by the manager; w1 is out of reach from 600 s past
    # workerLostTimeout (1500 s): nothing of a is left to lose (this was a KeyError at 1500 s).
    csv_text = HEADER + "a,0,team/main,0,500,,1,cpu=4\n"
    run, summary = _run_outage(tmp_path, csv_text, (("w1", 600 * S, 3000 * S),))
    assert _job(run, "a") == {"first": 0, "finish": 500, "site": "w1", "evictions": 0}
    assert summary["multiKueue"]["workers"]["w1"]["lostToTimeout"] == 0
