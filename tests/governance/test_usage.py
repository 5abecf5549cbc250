"""The usage ledger's arithmetic (api/usage.py): runs read from Workloads, clipping to a window,
grouping, prices, lost work, reconciliation and quota efficiency; and the price annotation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykueue.api import governance, usage

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def _time(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _workload(
    name: str = "w",
    namespace: str = "team-a",
    reserved: float | None = T0,
    finished: float | None = None,
    evicted: tuple[float, str] | None = None,
    usage_: dict[str, str] | None = None,
    flavors: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions = []
    status: dict[str, Any] = {"conditions": conditions}
    if reserved is not None:
        conditions.append({"type": "QuotaReserved", "status": "True", "lastTransitionTime": _time(reserved)})
        status["admission"] = {
            "clusterQueue": "training",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 2,
                    "flavors": flavors or {"nvidia.com/gpu": "a100", "cpu": "cpu", "memory": "cpu"},
                    "resourceUsage": usage_ or {"nvidia.com/gpu": "2", "cpu": "500m", "memory": "4Gi"},
                }
            ],
        }
    if finished is not None:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": _time(finished)})
    if evicted is not None:
        at, reason = evicted
        conditions.append({"type": "QuotaReserved", "status": "False", "lastTransitionTime": _time(at)})
        conditions.append(
            {"type": "Evicted", "status": "True", "reason": reason, "lastTransitionTime": _time(at)}
        )
    return {
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": "Job", "name": name}],
        },
        "spec": {"queueName": "main"},
        "status": status,
    }


def _run(
    start: float,
    end: float | None,
    namespace: str = "a",
    cq: str = "q",
    held: tuple[tuple[str, str, float], ...] = (("f", "gpu", 1.0),),
    ended_by: str = usage.FINISHED,
    owner: str = "",
) -> usage.Run:
    return usage.Run(
        f"{namespace}-{start}-{end}",
        namespace,
        "w",
        "main",
        cq,
        owner,
        start,
        end,
        ended_by if end else "",
        held,
    )


def test_a_workload_shows_its_run_with_the_quota_it_holds() -> None:
    run = usage.current_run(_workload(finished=T0 + 1800))
    assert run is not None
    assert (run.namespace, run.local_queue, run.cluster_queue, run.owner) == (
        "team-a",
        "main",
        "training",
        "Job/w",
    )
    assert (run.start, run.end, run.ended_by) == (T0, T0 + 1800, usage.FINISHED)
    # CPU in cores, memory in GiB, GPUs in units
    assert run.held == (("a100", "nvidia.com/gpu", 2.0), ("cpu", "cpu", 0.5), ("cpu", "memory", 4.0))
    assert usage.current_run(_workload(reserved=None)) is None


def test_transition_opens_then_closes_a_preempted_run() -> None:
    pending = _workload(reserved=None)
    admitted = _workload()
    preempted = _workload(reserved=None, evicted=(T0 + 600, "Preempted"))
    opened = usage.transition(pending, admitted, now=T0)
    assert [(r.start, r.end) for r in opened] == [(T0, None)]
    assert usage.transition(admitted, admitted, now=T0 + 5) == []  # nothing changed: no row written
    closed = usage.transition(admitted, preempted, now=T0 + 999)
    assert [(r.start, r.end, r.ended_by, r.lost) for r in closed] == [(T0, T0 + 600, "Preempted", True)]


def test_transition_of_a_deletion_and_of_a_readmission() -> None:
    admitted = _workload()
    assert [(r.end, r.ended_by) for r in usage.transition(admitted, None, now=T0 + 42)] == [
        (T0 + 42, usage.DELETED)
    ]
    readmitted = _workload(reserved=T0 + 900)
    rows = usage.transition(admitted, readmitted, now=T0 + 900)
    # the first run closes (released at the new reservation's time), the second opens
    assert [(r.start, r.end) for r in rows] == [(T0, T0 + 900), (T0 + 900, None)]


def test_usage_clips_to_the_window_and_prices_per_flavor() -> None:
    runs = [
        _run(T0, T0 + 7200, "a", held=(("a100", "gpu", 2.0), ("h100", "gpu", 1.0))),
        _run(T0 + 3600, None, "b", held=(("a100", "gpu", 4.0),)),  # still running
        _run(T0 - 7200, T0 - 3600, "c"),  # before the window
    ]
    prices = {"a100": {"gpu": 2.5}}  # h100 has no price
    rows = usage.usage(runs, prices, since=T0 + 1800, until=T0 + 5400, by="namespace")
    assert [r.group for r in rows] == ["a", "b"]
    a, b = rows
    assert a.hours == {"gpu": pytest.approx(3 * 1.0)}  # 3 GPUs for the hour inside the window
    assert a.cost == pytest.approx(2 * 1.0 * 2.5)
    assert a.unpriced == {"h100/gpu"}
    assert b.hours == {"gpu": pytest.approx(4 * 0.5)} and b.cost == pytest.approx(5.0)
    assert a.runs == b.runs == 1


def test_lost_work_is_the_preempted_runs_share() -> None:
    runs = [
        _run(T0, T0 + 3600, "a", ended_by=usage.PREEMPTED),
        _run(T0 + 3600, T0 + 5400, "a"),
    ]
    (row,) = usage.usage(runs, {"f": {"gpu": 1.0}}, T0, T0 + 86400, by="tenant")
    assert row.hours == {"gpu": pytest.approx(1.5)} and row.lost_hours == {"gpu": pytest.approx(1.0)}
    assert row.lost_cost == pytest.approx(1.0) and row.preempted == 1 and row.runs == 2


def test_grouping_by_queue() -> None:
    runs = [_run(T0, T0 + 60, "a", cq="x"), _run(T0, T0 + 60, "b", cq="x")]
    assert [r.group for r in usage.usage(runs, {}, T0, T0 + 60, by="clusterqueue")] == ["x"]
    assert [r.group for r in usage.usage(runs, {}, T0, T0 + 60, by="localqueue")] == ["a/main", "b/main"]
    with pytest.raises(ValueError, match="cannot group by 'team'"):
        usage.usage(runs, {}, T0, T0 + 60, by="team")


def test_reconcile_flags_a_job_whose_processes_ran_much_less_than_it_held() -> None:
    runs = [
        _run(T0, T0 + 100, "a", owner="Job/good"),
        _run(T0, T0 + 100, "a", owner="Job/bad"),
        _run(T0, None, "a", owner="Job/open"),  # still running: not checked
    ]
    ran = {"a/Job/good": 98.0, "a/Job/bad": 40.0, "a/Job/open": 1.0}
    checks = {c.owner: c.ok for c in usage.reconcile(runs, ran, since=T0)}
    assert checks == {"Job/good": True, "Job/bad": False}
    assert usage.reconcile(runs, ran, since=T0 + 1) == []  # runs that began before the window: not checked


def test_prices_parse_and_the_annotation_is_validated() -> None:
    assert usage.parse_prices("nvidia.com/gpu=2.50, cpu=0.04,memory=0.005") == {
        "nvidia.com/gpu": 2.5,
        "cpu": 0.04,
        "memory": 0.005,
    }
    for bad, message in [
        ("gpu=-1", "is not RESOURCE=PRICE"),
        ("gpu", "is not RESOURCE=PRICE"),
        ("", "got nothing"),
        ("gpu=1,gpu=2", "priced twice"),
    ]:
        with pytest.raises(ValueError, match=message):
            usage.parse_prices(bad)
    problems = governance.problems("ResourceFlavor", {governance.PRICE: "nvidia.com/gpu=2.5,cpu=abc"})
    assert [p.path for p in problems] == ["metadata.annotations[pykueue.io/price]"]
    assert "'cpu=abc'" in problems[0].message
    assert governance.problems("ResourceFlavor", {governance.PRICE: "g_pu!=1"})[0].message.startswith(
        "g_pu!: not a resource name"
    )
    unknown = governance.problems("ResourceFlavor", {"pykueue.io/prices": "x=1"})
    assert "unknown pykueue annotation on a ResourceFlavor" in unknown[0].message


def test_efficiency_borrowed_and_lent_in_a_cohort() -> None:
    queues = [
        usage.Queue("training", "pool", {("f", "gpu"): 8.0}),
        usage.Queue("inference", "pool", {("f", "gpu"): 16.0}),
    ]
    runs = [
        # training runs 16 GPUs (8 borrowed) for the first half; inference 4 all along
        _run(T0, T0 + 1800, cq="training", held=(("f", "gpu", 16.0),)),
        _run(T0, T0 + 3600, cq="inference", held=(("f", "gpu", 4.0),)),
    ]
    rows = {r.cluster_queue: r for r in usage.efficiency(runs, queues, T0, T0 + 3600)}
    training, inference = rows["training"], rows["inference"]
    assert (training.nominal, training.used, training.borrowed, training.lent) == pytest.approx((8, 8, 4, 0))
    assert (inference.used, inference.borrowed, inference.lent) == pytest.approx((4, 0, 4))
    assert inference.utilisation == pytest.approx(0.25)


# ------------------------------------------------------------------ properties

_windows = st.tuples(st.floats(0, 10_000), st.floats(0, 10_000)).map(sorted)
_runs = st.lists(
    st.builds(
        lambda s, d, a, ns, cq, lost: _run(
            T0 + s,
            None if d is None else T0 + s + d,
            ns,
            cq,
            (("f", "gpu", float(a)),),
            "Preempted" if lost else "Finished",
        ),
        st.floats(0, 10_000),
        st.one_of(st.none(), st.floats(0, 5_000)),
        st.integers(1, 8),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["x", "y"]),
        st.booleans(),
    ),
    max_size=12,
)


@given(_runs, _windows, st.floats(0, 10_000))
def test_splitting_the_window_adds_up(runs: list[usage.Run], window: list[float], cut: float) -> None:
    """Usage over [s, u] is usage over [s, m] plus [m, u]: nothing counted twice or dropped."""
    since, until = T0 + window[0], T0 + window[1]
    middle = min(max(T0 + cut, since), until)

    def total(a: float, b: float) -> tuple[float, float]:
        rows = usage.usage(runs, {"f": {"gpu": 2.0}}, a, b, by="namespace")
        return sum(r.hours.get("gpu", 0.0) for r in rows), sum(r.lost_cost for r in rows)

    whole, parts = total(since, until), [total(since, middle), total(middle, until)]
    assert whole[0] == pytest.approx(parts[0][0] + parts[1][0], abs=1e-6)
    assert whole[1] == pytest.approx(parts[0][1] + parts[1][1], abs=1e-6)
    assert whole[1] <= 2.0 * whole[0] + 1e-9  # lost work is part of the work


@given(_runs, _windows)
def test_groupings_agree_and_efficiency_matches_usage(runs: list[usage.Run], window: list[float]) -> None:
    since, until = T0 + window[0], T0 + window[1]
    totals = {
        by: sum(r.hours.get("gpu", 0.0) for r in usage.usage(runs, {}, since, until, by=by))
        for by in usage.GROUPINGS
    }
    assert max(totals.values()) == pytest.approx(min(totals.values()), abs=1e-6)
    queues = [usage.Queue("x", "pool", {("f", "gpu"): 4.0}), usage.Queue("y", "pool", {("f", "gpu"): 4.0})]
    rows = usage.efficiency(runs, queues, since, until)
    span_hours = (until - since) / 3600
    assert sum(r.used for r in rows) * span_hours == pytest.approx(totals["namespace"], abs=1e-6)
    for row in rows:
        assert row.borrowed <= row.used + 1e-9 and row.lent <= row.nominal + 1e-9
    # what is lent inside the cohort is at most what is borrowed there
    assert sum(r.lent for r in rows) <= sum(r.borrowed for r in rows) + 1e-6


def _pools_morning() -> dict[str, Any]:
    """The worked example of docs/governance.md: a morning of the inference/training/research pools."""
    nine = 1_800_003_600.0 - (1_800_003_600.0 % 86400) + 9 * 3600  # 09:00 UTC
    h = 3600.0

    def run(
        ns: str, cq: str, gpus: float, start: float, end: float | None, why: str = "Finished"
    ) -> usage.Run:
        return usage.Run(
            f"{ns}-{start}",
            ns,
            "w",
            "main",
            cq,
            "",
            nine + start * h,
            None if end is None else nine + end * h,
            why if end is not None else "",
            (("h100", "nvidia.com/gpu", gpus),),
        )

    runs = [
        run("serving", "inference", 16, 0, None),  # web, all morning
        run("training", "training", 16, 0, 1, usage.PREEMPTED),  # pretrain, 8 borrowed; reclaimed at 10:00
        run("research", "research", 8, 1, 2),  # big-study takes research's GPUs back
        run("training", "training", 16, 2, None),  # pretrain again once research is idle
    ]
    queues = [
        usage.Queue("inference", "gpus", {("h100", "nvidia.com/gpu"): 16}),
        usage.Queue("training", "gpus", {("h100", "nvidia.com/gpu"): 8}),
        usage.Queue("research", "gpus", {("h100", "nvidia.com/gpu"): 8}),
    ]
    return {
        "source": "example",
        "since": nine,
        "until": nine + 4 * h,
        "runs": [r.to_json() for r in runs],
        "prices": {"h100": usage.parse_prices("nvidia.com/gpu=2.50")},
        "queues": [q.to_json() for q in queues],
        "ran": {},
    }


def test_the_worked_example_of_the_docs(capsys: pytest.CaptureFixture[str]) -> None:
    from pykueue.cli import report

    doc = _pools_morning()
    report.usage_report(doc, "namespace", "table")
    report.efficiency_report(doc, "table")
    printed = capsys.readouterr().out.splitlines()
    assert [
        line.split()
        for line in printed
        if line.split()[0] in ("research", "serving", "training", "inference")
    ] == [
        ["research", "1", "8.00", "20.00", "0.00", "0.00", "0"],
        ["serving", "1", "64.00", "160.00", "0.00", "0.00", "0"],
        ["training", "2", "48.00", "120.00", "16.00", "40.00", "1"],
        ["inference", "h100", "nvidia.com/gpu", "16.00", "16.00", "0.00", "0.00", "100%"],
        ["research", "h100", "nvidia.com/gpu", "8.00", "2.00", "0.00", "6.00", "25%"],
        ["training", "h100", "nvidia.com/gpu", "8.00", "12.00", "6.00", "0.00", "150%"],
    ]


_steps = st.lists(
    st.tuples(st.sampled_from(["admit", "preempt", "evict", "finish", "noise"]), st.integers(1, 600)),
    max_size=20,
)


@given(_steps, st.booleans())
def test_the_ledger_follows_a_workloads_life(steps: list[tuple[str, int]], delete: bool) -> None:
    """Whatever order a workload is admitted, evicted and finished in, the rows `transition`
    writes are exactly its admissions, each ended when and how it really ended."""
    ledger: dict[tuple[str, float], usage.Run] = {}
    expected: list[tuple[float, float | None, str]] = []  # (start, end, ended_by) per admission
    now, current = T0, _workload(reserved=None)
    finished = False
    for action, wait in steps:
        now += wait
        if finished:
            break
        held = expected and expected[-1][1] is None
        if action == "admit" and not held:
            after = _workload(reserved=now)
            expected.append((now, None, ""))
        elif action in ("preempt", "evict") and held:
            reason = "Preempted" if action == "preempt" else "PodsReadyTimeout"
            after = _workload(reserved=None, evicted=(now, reason))
            expected[-1] = (expected[-1][0], now, reason)
        elif action == "finish" and held:
            after = _workload(reserved=expected[-1][0], finished=now)
            expected[-1] = (expected[-1][0], now, usage.FINISHED)
            finished = True
        else:  # nothing that changes a run: the same workload written again
            after = current
        for run in usage.transition(current, after, now=now):
            ledger[(run.uid, run.start)] = run
        current = after
    if delete:
        now += 1
        for run in usage.transition(current, None, now=now):
            ledger[(run.uid, run.start)] = run
        if expected and expected[-1][1] is None:
            expected[-1] = (expected[-1][0], now, usage.DELETED)
    got = sorted((r.start, r.end, r.ended_by) for r in ledger.values())
    assert got == expected
