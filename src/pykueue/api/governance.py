"""pykueue's governance policies, written as annotations on upstream's objects.

Upstream's CRD schemas stay exactly as they are (a cluster with upstream Kueue's CRDs
accepts these manifests), so every pykueue policy is an annotation under
``pykueue.io/``; a ClusterQueue or LocalQueue without one behaves exactly as upstream's.

    pykueue.io/default-priority-class   LocalQueue, ClusterQueue: the WorkloadPriorityClass
                                        of their workloads that name none (docs/governance.md)
    pykueue.io/aging                    ClusterQueue: a pending workload's effective priority
                                        rises with its wait, e.g.
                                        '{"rate": "1/10m", "cap": 100, "priorityClasses": ["research"]}'
    pykueue.io/preemption-contract      ClusterQueue: what its admitted workloads are promised, e.g.
                                        '{"minRunTime": "30m", "maxPreemptions": 2, "window": "24h"}'
    pykueue.io/preemption-cost          ClusterQueue, Cohort (for its ClusterQueues without one): how
                                        preemptors weigh what they destroy, e.g. '{"leastLostWork":
                                        true, "waitForEnd": "30m", "maxLostWork": "4h", "putOffFor": "6h"}'
    pykueue.io/reservation              ClusterQueue, Cohort: a workload waiting longer than ``after``
                                        that cannot fit holds the capacity it needs against
                                        borrowers, with backfill by declared limit, e.g. '{"after": "2h"}'
    pykueue.io/checkpoint-interval      Workload (from its job): how often it saves its progress, e.g.
                                        "30m"; what a preemption loses is the run since the last one
    pykueue.io/preempted-at             Workload, written by pykueue: when it was preempted (the
                                        latest times, comma-separated RFC 3339), so a contract's
                                        maxPreemptions survives a restart of the controller
    pykueue.io/lost-work                Workload, written by pykueue: the work its preemptions threw
                                        away (JSON, resource-microseconds, CPU in milli-units), so
                                        `describe` shows it across a restart of the controller
    pykueue.io/price                    ResourceFlavor: price per unit-hour of its resources (memory
                                        per GiB-hour), e.g. 'nvidia.com/gpu=2.50,cpu=0.04,memory=0.005';
                                        read by `pykueue report usage` only (api/usage.py)

A policy value is JSON (YAML flow style is JSON's superset only in part, so JSON it is).
`problems` checks an object's annotations the way a webhook would (every problem, with
the field path ``metadata.annotations[pykueue.io/aging].rate``); `aging` and `contract`
read a valid value into a small immutable policy. Durations are microseconds, as every
time in the engine. Any other ``pykueue.io/`` key on these kinds is refused: a misspelt
policy would otherwise do nothing, silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, TypeVar

from pykueue.api import usage
from pykueue.api.meta import dns_subdomain_errors, qualified_name_errors
from pykueue.errors import FieldProblem

PREFIX = "pykueue.io/"
DEFAULT_PRIORITY_CLASS = "pykueue.io/default-priority-class"
AGING = "pykueue.io/aging"
PREEMPTION_CONTRACT = "pykueue.io/preemption-contract"
PREEMPTED_AT = "pykueue.io/preempted-at"
PREEMPTION_COST = "pykueue.io/preemption-cost"
CHECKPOINT_INTERVAL = "pykueue.io/checkpoint-interval"
RESERVATION = "pykueue.io/reservation"
LOST_WORK = "pykueue.io/lost-work"
PRICE = usage.PRICE

KEYS_BY_KIND: dict[str, frozenset[str]] = {
    "ClusterQueue": frozenset(
        {DEFAULT_PRIORITY_CLASS, AGING, PREEMPTION_CONTRACT, PREEMPTION_COST, RESERVATION}
    ),
    "Cohort": frozenset({RESERVATION, PREEMPTION_COST}),
    "LocalQueue": frozenset({DEFAULT_PRIORITY_CLASS}),
    "ResourceFlavor": frozenset({PRICE}),
}
AGING_FIELDS = ("rate", "cap", "priorityClasses", "maxPriority")
CONTRACT_FIELDS = ("minRunTime", "maxPreemptions", "window")
COST_FIELDS = ("leastLostWork", "waitForEnd", "maxLostWork", "putOffFor")
RESERVATION_FIELDS = ("after",)
MAX_INT32 = 2**31 - 1

_UNITS = {"h": 3600 * 10**6, "m": 60 * 10**6, "s": 10**6, "ms": 1000}
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s))+$")
_P = TypeVar("_P")

_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")


@dataclass(frozen=True, slots=True)
class Aging:
    """``points`` of priority per ``per`` microseconds of wait, at most ``cap`` in all.

    Only workloads whose priority class is in ``priority_classes`` (when given) and whose
    own priority is at most ``max_priority`` (when given) age.
    """

    points: int
    per: int
    cap: int
    priority_classes: tuple[str, ...] | None = None
    max_priority: int | None = None

    def applies_to(self, priority: int, priority_class: str) -> bool:
        if self.priority_classes is not None and priority_class not in self.priority_classes:
            return False
        return self.max_priority is None or priority <= self.max_priority

    def boost(self, waited: int) -> int:
        """The priority added after ``waited`` microseconds in the queue."""
        if waited <= 0:
            return 0
        return min(self.cap, waited * self.points // self.per)


@dataclass(frozen=True, slots=True)
class PreemptionContract:
    """A workload of the queue is not preempted before it ran ``min_run_time``, nor more
    than ``max_preemptions`` times within ``window`` (both optional, None: no promise)."""

    min_run_time: int | None = None
    max_preemptions: int | None = None
    window: int | None = None


@dataclass(frozen=True, slots=True)
class PreemptionCost:
    """How a ClusterQueue's preemptors weigh the work their victims lose (docs/governance.md).

    ``least_lost``: among the victims upstream's rules allow, the ones that lose the least
    work (quota held x time since the last checkpoint) go first. ``wait_for_end``: when
    victims whose declared limit ends them within this many microseconds would make room
    alone, the preemptor waits for them instead of stopping anything (None: never waits).
    ``max_lost``/``put_off_for``: a preemption whose victims would lose more than ``max_lost``
    microseconds of work the size of the preemptor's request is put off while the preemptor
    has waited less than ``put_off_for`` (both or neither).
    """

    least_lost: bool = True
    wait_for_end: int | None = None
    max_lost: int | None = None
    put_off_for: int | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """Reservations for an aged head (docs/governance.md, "Reservations for an aged head"): a
    workload that has waited ``after`` microseconds and cannot fit holds the capacity it needs
    at the earliest time it can start; others may not borrow it, and new work may start in it
    only when its declared limit ends it before then (backfill)."""

    after: int


_SECOND = 10**6


def parse_duration(text: str) -> int:
    """A positive Go-style duration of h, m, s and ms ("10m", "1h30m") in microseconds."""
    if not isinstance(text, str) or not _DURATION.match(text.strip()):
        raise ValueError(f"{text!r} is not a duration (expected e.g. 90s, 10m, 1h30m)")
    total = sum((Fraction(n) * _UNITS[u] for n, u in _PART.findall(text.strip())), Fraction(0))
    return int(total)


def duration_text(micros: int) -> str:
    """Microseconds written as the policies' durations are: 1h30m, 20m, 90s, 250ms (the
    inverse of `parse_duration`)."""
    if micros % _SECOND:
        return f"{micros / 1000:g}ms"
    parts = []
    for unit, size in (("h", 3600 * _SECOND), ("m", 60 * _SECOND), ("s", _SECOND)):
        if micros >= size:
            parts.append(f"{micros // size}{unit}")
            micros %= size
    return "".join(parts) or "0s"


def problems(kind: str, annotations: Mapping[str, str]) -> list[FieldProblem]:
    """Every problem with the pykueue annotations of one object of ``kind``."""
    allowed = KEYS_BY_KIND.get(kind, frozenset())
    out: list[FieldProblem] = []
    for key in sorted(annotations):
        if not key.startswith(PREFIX):
            continue
        path = f"metadata.annotations[{key}]"
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            out.append(FieldProblem(path, f"unknown pykueue annotation on a {kind} (known here: {known})"))
            continue
        value = annotations[key]
        if key == DEFAULT_PRIORITY_CLASS:
            out.extend(
                FieldProblem(path, f"must name a WorkloadPriorityClass: {m}")
                for m in dns_subdomain_errors(value)
            )
        elif key == AGING:
            _aging(value, path, out)
        elif key == PREEMPTION_CONTRACT:
            _contract(value, path, out)
        elif key == PREEMPTION_COST:
            _cost(value, path, out)
        elif key == RESERVATION:
            _reservation(value, path, out)
        elif key == PRICE:
            _prices(value, path, out)
    return out


def _prices(raw: str, path: str, out: list[FieldProblem]) -> None:
    try:
        prices = usage.parse_prices(raw)
    except ValueError as exc:
        out.append(FieldProblem(path, str(exc)))
        return
    for resource in prices:
        out.extend(
            FieldProblem(path, f"{resource}: not a resource name: {m}")
            for m in qualified_name_errors(resource)
        )


def aging(annotations: Mapping[str, str]) -> Aging | None:
    """The aging policy of a (valid) ClusterQueue, None when it has none."""
    raw = annotations.get(AGING)
    if raw is None:
        return None
    return _aging(raw, f"metadata.annotations[{AGING}]", None)


def contract(annotations: Mapping[str, str]) -> PreemptionContract | None:
    """The preemption contract of a (valid) ClusterQueue, None when it has none."""
    raw = annotations.get(PREEMPTION_CONTRACT)
    if raw is None:
        return None
    return _contract(raw, f"metadata.annotations[{PREEMPTION_CONTRACT}]", None)


def preemption_cost(annotations: Mapping[str, str]) -> PreemptionCost | None:
    """The preemption-cost policy of a (valid) ClusterQueue, None when it has none."""
    raw = annotations.get(PREEMPTION_COST)
    if raw is None:
        return None
    return _cost(raw, f"metadata.annotations[{PREEMPTION_COST}]", None)


def reservation(annotations: Mapping[str, str]) -> Reservation | None:
    """The reservation policy of a (valid) ClusterQueue or Cohort, None when it has none."""
    raw = annotations.get(RESERVATION)
    if raw is None:
        return None
    return _reservation(raw, f"metadata.annotations[{RESERVATION}]", None)


def checkpoint_interval(annotations: Mapping[str, str]) -> tuple[int | None, str]:
    """A Workload's declared checkpoint interval (microseconds) and the problem with it ("" if none)."""
    raw = annotations.get(CHECKPOINT_INTERVAL)
    if raw is None:
        return None, ""
    path = f"metadata.annotations[{CHECKPOINT_INTERVAL}]"
    out: list[FieldProblem] = []
    found = _duration(raw, path, out)
    return found, (f"{out[0].path}: {out[0].message}" if out else "")


def default_priority_class(annotations: Mapping[str, str]) -> str:
    return annotations.get(DEFAULT_PRIORITY_CLASS, "")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def preempted_at(annotations: Mapping[str, str]) -> tuple[int, ...]:
    """The preemption times a Workload carries (microseconds since the epoch, oldest first).

    pykueue writes the annotation itself; a time it cannot read is passed over rather
    than refused, since the worst a lost time does is end a contract's protection early.
    """
    times = []
    for part in annotations.get(PREEMPTED_AT, "").split(","):
        try:
            moment = datetime.fromisoformat(part.strip().replace("Z", "+00:00"))
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        delta = moment - _EPOCH
        times.append((delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds)
    return tuple(sorted(times))


def preempted_at_text(times: Iterable[int]) -> str:
    """The annotation's value for ``times`` (microseconds since the epoch)."""
    out = []
    for value in times:
        seconds, micros = divmod(value, 10**6)
        moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)
        out.append(moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    return ",".join(out)


class _Invalid(ValueError):
    pass


def _report(out: list[FieldProblem] | None, path: str, message: str) -> None:
    if out is None:
        raise _Invalid(f"{path}: {message}")
    out.append(FieldProblem(path, message))


def _object(
    raw: str, path: str, fields: tuple[str, ...], out: list[FieldProblem] | None
) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        _report(out, path, f"must be a JSON object with the fields {', '.join(fields)} (got {raw!r})")
        return None
    if not isinstance(value, dict):
        _report(out, path, f"must be a JSON object with the fields {', '.join(fields)}")
        return None
    for name in sorted(set(value) - set(fields)):
        _report(out, f"{path}.{name}", f"unknown field (known: {', '.join(fields)})")
    return value


def _integer(value: Any, path: str, out: list[FieldProblem] | None, minimum: int) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= MAX_INT32:
        _report(out, path, f"must be an integer from {minimum} to {MAX_INT32} (got {value!r})")
        return None
    return value


def _duration(value: Any, path: str, out: list[FieldProblem] | None) -> int | None:
    try:
        result = parse_duration(value)
    except ValueError as exc:
        _report(out, path, str(exc))
        return None
    if result <= 0:
        _report(out, path, "must be longer than 0")
        return None
    return result


def _aging(raw: str, path: str, out: list[FieldProblem] | None) -> Aging | None:
    value = _object(raw, path, AGING_FIELDS, out)
    if value is None:
        return None
    points = per = cap = None
    rate = value.get("rate")
    if rate is None:
        _report(out, f"{path}.rate", 'required field is missing (priority points per wait, e.g. "1/10m")')
    else:
        text = rate if isinstance(rate, str) else ""
        head, slash, tail = text.partition("/")
        if not slash or not head.strip().isdigit():
            _report(out, f"{path}.rate", f'must be POINTS/DURATION, e.g. "1/10m" (got {rate!r})')
        else:
            points = _integer(int(head), f"{path}.rate", out, 1)
            per = _duration(tail.strip(), f"{path}.rate", out)
    if "cap" not in value:
        _report(out, f"{path}.cap", "required field is missing (the most priority aging may add)")
    else:
        cap = _integer(value["cap"], f"{path}.cap", out, 1)
    classes: tuple[str, ...] | None = None
    if "priorityClasses" in value:
        names = value["priorityClasses"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            _report(out, f"{path}.priorityClasses", "must be a list of priority class names")
        else:
            for i, name in enumerate(names):
                if name:  # "" stands for workloads without a priority class
                    for m in dns_subdomain_errors(name):
                        _report(out, f"{path}.priorityClasses[{i}]", m)
            classes = tuple(names)
    maximum = None
    if "maxPriority" in value:
        raw_max = value["maxPriority"]
        if not isinstance(raw_max, int) or isinstance(raw_max, bool) or abs(raw_max) > MAX_INT32:
            _report(out, f"{path}.maxPriority", f"must be a 32-bit integer (got {raw_max!r})")
        else:
            maximum = raw_max
    if points is None or per is None or cap is None:
        return None
    return Aging(points=points, per=per, cap=cap, priority_classes=classes, max_priority=maximum)


def contract_setting(value: Any, path: str) -> PreemptionContract | FieldProblem:
    """A contract written as a mapping (a configuration file's ``pykueue.preemptionContract``),
    or its first problem, naming ``path`` and the field."""
    if not isinstance(value, dict):
        return FieldProblem(path, f"must be a mapping with the fields {', '.join(CONTRACT_FIELDS)}")
    out: list[FieldProblem] = [
        FieldProblem(f"{path}.{name}", f"unknown field (known: {', '.join(CONTRACT_FIELDS)})")
        for name in sorted(set(value) - set(CONTRACT_FIELDS))
    ]
    found = _contract_fields(value, path, out)
    if out or found is None:
        return out[0] if out else FieldProblem(path, "not a preemption contract")
    return found


def _contract(raw: str, path: str, out: list[FieldProblem] | None) -> PreemptionContract | None:
    value = _object(raw, path, CONTRACT_FIELDS, out)
    if value is None:
        return None
    return _contract_fields(value, path, out)


def _contract_fields(
    value: dict[str, Any], path: str, out: list[FieldProblem] | None
) -> PreemptionContract | None:
    if not value:
        _report(out, path, f"must set at least one of {', '.join(CONTRACT_FIELDS)}")
        return None
    min_run = _duration(value["minRunTime"], f"{path}.minRunTime", out) if "minRunTime" in value else None
    count = window = None
    if "maxPreemptions" in value:
        count = _integer(value["maxPreemptions"], f"{path}.maxPreemptions", out, 0)
    if "window" in value:
        window = _duration(value["window"], f"{path}.window", out)
    if ("maxPreemptions" in value) != ("window" in value):
        _report(out, path, "maxPreemptions and window go together (at most maxPreemptions within window)")
    return PreemptionContract(min_run_time=min_run, max_preemptions=count, window=window)


def cost_setting(value: Any, path: str) -> PreemptionCost:
    """A preemption-cost policy written as a mapping (a configuration file's
    ``pykueue.preemptionCost``); the first problem is a ValueError naming ``path`` and the field."""
    return _setting(value, path, COST_FIELDS, _cost_fields, "a preemption-cost policy")


def _setting(
    value: Any,
    path: str,
    fields: tuple[str, ...],
    read: Callable[[dict[str, Any], str, list[FieldProblem]], _P | None],
    what: str,
) -> _P:
    """A site-wide policy from a configuration file: ``read`` on a mapping of ``fields`` only,
    the first problem raised as a ValueError naming its field."""
    if not isinstance(value, dict):
        raise ValueError(f"{path}: must be a mapping with the fields {', '.join(fields)}")
    out: list[FieldProblem] = [
        FieldProblem(f"{path}.{name}", f"unknown field (known: {', '.join(fields)})")
        for name in sorted(set(value) - set(fields))
    ]
    found = read(value, path, out)
    if out or found is None:
        first = out[0] if out else FieldProblem(path, f"not {what}")
        raise ValueError(f"{first.path}: {first.message}")
    return found


def _cost(raw: str, path: str, out: list[FieldProblem] | None) -> PreemptionCost | None:
    value = _object(raw, path, COST_FIELDS, out)
    if value is None:
        return None
    return _cost_fields(value, path, out)


def _cost_fields(value: dict[str, Any], path: str, out: list[FieldProblem] | None) -> PreemptionCost | None:
    if not value:
        _report(out, path, f"must set at least one of {', '.join(COST_FIELDS)}")
        return None
    least = value.get("leastLostWork", False)
    if not isinstance(least, bool):
        _report(out, f"{path}.leastLostWork", f"must be true or false (got {least!r})")
        return None
    wait = _duration(value["waitForEnd"], f"{path}.waitForEnd", out) if "waitForEnd" in value else None
    if "waitForEnd" in value and wait is None:
        return None
    if ("maxLostWork" in value) != ("putOffFor" in value):
        _report(
            out,
            path,
            "maxLostWork and putOffFor go together (put off a preemption losing more than maxLostWork for at most putOffFor)",
        )
        return None
    most = _duration(value["maxLostWork"], f"{path}.maxLostWork", out) if "maxLostWork" in value else None
    put_off = _duration(value["putOffFor"], f"{path}.putOffFor", out) if "putOffFor" in value else None
    if "maxLostWork" in value and (most is None or put_off is None):
        return None
    return PreemptionCost(least_lost=least, wait_for_end=wait, max_lost=most, put_off_for=put_off)


def reservation_setting(value: Any, path: str) -> Reservation:
    """A reservation policy written as a mapping (a configuration file's
    ``pykueue.reservation``); the first problem is a ValueError naming ``path`` and the field."""
    return _setting(value, path, RESERVATION_FIELDS, _reservation_fields, "a reservation policy")


def _reservation(raw: str, path: str, out: list[FieldProblem] | None) -> Reservation | None:
    value = _object(raw, path, RESERVATION_FIELDS, out)
    if value is None:
        return None
    return _reservation_fields(value, path, out)


def _reservation_fields(
    value: dict[str, Any], path: str, out: list[FieldProblem] | None
) -> Reservation | None:
    if "after" not in value:
        _report(
            out, f"{path}.after", 'required field is missing (the wait before a workload reserves, e.g. "2h")'
        )
        return None
    after = _duration(value["after"], f"{path}.after", out)
    return None if after is None else Reservation(after=after)


def lost_work(annotations: Mapping[str, str]) -> dict[str, int] | None:
    """The lost work a Workload carries (``pykueue.io/lost-work``), None without any.

    pykueue writes it itself; a value it cannot read is passed over (the worst is a
    `describe` that shows less), never refused."""
    raw = annotations.get(LOST_WORK)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    out = {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
    return out or None


def lost_work_text(lost: Mapping[str, int] | None) -> str:
    """The annotation's value for ``lost`` ("" for none)."""
    if not lost:
        return ""
    return json.dumps(dict(sorted(lost.items())), separators=(",", ":"))
