"""Issue 45, item 1 in the simulator: the motivating case. A gang that must borrow from the
other teams of its cohort while they stream work into their idle quota waits for the whole
stream under upstream's rules; with a reservation it starts soon after its wait passes the
policy's ``after``, and the streams keep their nominal quota meanwhile."""

from __future__ import annotations

from .helpers import cluster_queue, design, run, times

POLICY = '  annotations: {pykueue.io/reservation: \'{"after": "1h"}\'}\n'
HOUR = 3600


def _trace() -> str:
    # Teams b and c (4 CPUs of nominal each) start a 3-CPU job every 30 minutes for a day, each
    # running an hour: two at a time each, they fill the cohort's 12 CPUs, borrowing what `a`
    # leaves idle. The gang (6 CPUs; a's nominal is 4) arrives at 3h10m.
    rows = ["name,queue,submit,runtime,requests", f"gang,a/main,{3 * HOUR + 600},3600,cpu=6"]
    for k in range(48):
        rows.append(f"b-{k},b/main,{k * 1800},3600,cpu=3")
        rows.append(f"c-{k},c/main,{k * 1800 + 900},3600,cpu=3")
    return "\n".join(rows) + "\n"


def _design(policy: bool) -> str:
    queues = [cluster_queue(name, "4", cohort="co", reclaim="Never") for name in ("a", "b", "c")]
    if policy:
        queues[0] = queues[0].replace("metadata: {name: a}\n", "metadata:\n  name: a\n" + POLICY, 1)
    return design(*queues)


def test_the_borrowing_gang_starves_under_upstream_rules() -> None:
    result = run(_design(False), _trace())
    assert times(result, "gang")["first"] >= 20 * HOUR  # only once the streams dry up


def test_with_a_reservation_the_borrowing_gang_starts() -> None:
    result = run(_design(True), _trace())
    first = times(result, "gang")["first"]
    assert 4 * HOUR + 600 <= first <= 6 * HOUR, first  # past `after`, then as the borrowed jobs end
    # The streams were held back only while the reservation held: all of them still ran.
    assert all(times(result, f"{team}-{k}")["finish"] > 0 for team in "bc" for k in range(48))
