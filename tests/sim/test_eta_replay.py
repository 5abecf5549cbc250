"""The ETA replay: predictions at submission against the replay's own admissions."""

from __future__ import annotations

from pykueue.engine import runtimes
from pykueue.sim import eta_replay, trace

from .helpers import cluster_queue, design

# One CPU: jobs run one at a time, 10 s each. Three arrive at 0 (their order is the uids'),
# seven more from 25 s, a tenth of a second apart.
TRACE = "name,submit,queue,runtime,requests\n" + "".join(
    f"j{n},{0 if n < 3 else 25 + (n - 3) / 10},q/main,10,cpu=1\n" for n in range(10)
)


def _replay() -> eta_replay.Accuracy:
    jobs = trace.parse_csv(TRACE, "trace.csv")
    settings = runtimes.Settings(min_samples=2)
    return eta_replay.replay("t", design(cluster_queue("q", "1")), jobs, every=1, settings=settings)


def test_every_job_is_predicted_and_compared_with_its_real_start() -> None:
    accuracy = _replay()
    assert [p.job for p in accuracy.predictions] == [f"q/j{n}" for n in range(10)]
    actual = {p.job: (p.actual or 0) / 1e6 for p in accuracy.predictions}
    assert sorted(actual[f"q/j{n}"] for n in range(3)) == [0, 10, 20]
    assert [actual[f"q/j{n}"] for n in range(3, 10)] == [30, 40, 50, 60, 70, 80, 90]


def test_once_runtimes_are_learned_the_estimate_is_exact() -> None:
    accuracy = _replay()
    late = [p for p in accuracy.predictions if p.submitted > 0]
    # At 25 s two jobs finished (10 s each) and one has run 5 s: everything is known.
    assert [p.estimate for p in late] == [p.actual for p in late]
    # Before anything finished nothing was known of the running one's end: no made-up time.
    early = accuracy.predictions[1]
    assert early.unknown and early.fresh and early.estimate is None and early.actual is not None
    assert accuracy.figures("learned")["coverage"] == 1.0  # the ranges held every learned start


def test_naive_baseline_is_position_times_mean() -> None:
    accuracy = _replay()
    late = [p for p in accuracy.predictions if p.submitted > 0]
    # The k-th late job has k late ones ahead of it (the running one is not pending), 10 s each.
    assert [p.naive - p.submitted for p in late] == [k * 10_000_000 for k in range(7)]


def test_a_declared_limit_gives_a_range_that_holds_the_start_before_anything_is_learned() -> None:
    """Issue 44, item 1: with a limit (30 s, jobs run 10 s) the fresh estimate is no longer
    unknown, nor the limit taken as the running time: a range up to the limit holds the start."""
    limited = TRACE.replace(
        "name,submit,queue,runtime,requests\n", "name,submit,queue,runtime,requests,maxExecutionTime\n"
    )
    limited = "\n".join(
        line + ",30" if line and not line.startswith("name") else line for line in limited.split("\n")
    )
    jobs = trace.parse_csv(limited, "trace.csv")
    settings = runtimes.Settings(min_samples=2)
    accuracy = eta_replay.replay("t", design(cluster_queue("q", "1")), jobs, every=1, settings=settings)
    early = accuracy.predictions[1]
    assert early.fresh and not early.unknown and early.covered() is True, early
    # Taken as the running time, the limit (3 x the 10 s each job ahead ran) would put j1 at
    # three times its real start; as a bound, half of it is expected.
    assert early.estimate is not None and early.actual is not None
    assert abs(early.estimate - early.actual) < abs(3 * early.actual - early.actual)
