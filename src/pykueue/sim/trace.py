"""Reading a trace: one job per CSV row or JSONL line, every problem named by file, line and field.

Both formats carry the same fields (docs/simulator.md has the full table):

    name        job name (default ``job-<line>``); unique per namespace
    submit      when it is submitted: seconds from the start, or a duration (``90s``, ``1h30m``)
    queue       ``namespace/localqueue``
    priority    an integer, or the name of a WorkloadPriorityClass/PriorityClass of the design
    class       the class reported on (default: the priority class name, else ``default``)
    runtime     how long it runs once admitted (seconds or a duration)
    checkpoint  optional: progress between checkpoints (seconds or a duration)
    maxExecutionTime  optional: whole seconds (or a duration) the job may be admitted in all
    count       pods (default 1); ``minCount`` optional, allows partial admission
    requests    per-pod requests: ``cpu=4;memory=16Gi;nvidia.com/gpu=1`` in CSV, an object in JSONL
    podSets     several pod sets instead: a JSON list of ``{name, count, minCount, requests}``

Problems are collected, not raised one by one, so a user fixes a file in one pass:
`TraceError` lists each as ``file:line field: message``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from pykueue.api import quantity
from pykueue.engine import intake
from pykueue.engine.resources import resource_units
from pykueue.errors import InputError
from pykueue.sim.jobs import SECOND, Job, PodSetSpec

FIELDS = (
    "name",
    "submit",
    "queue",
    "priority",
    "class",
    "runtime",
    "checkpoint",
    "maxExecutionTime",
    "count",
    "minCount",
    "requests",
    "podSets",
)


class TraceError(InputError):
    """A trace (or generator file) is not valid; `problems` lists every ``where field: message``."""

    def __init__(self, problems: list[str], jobs: list[Job] | None = None) -> None:
        self.problems = problems
        self.jobs = jobs or []  # the rows that were good
        super().__init__("\n".join(grouped(problems)))


def grouped(problems: list[str]) -> list[str]:
    """Every problem, once: the same message on many lines of a file becomes one entry naming them all.

    ``t.csv:3 runtime: must be positive`` and ``t.csv:9 runtime: must be positive`` become
    ``t.csv:3,9 runtime: must be positive``; nothing is left out.
    """
    order: list[tuple[str, str]] = []
    lines: dict[tuple[str, str], list[str]] = {}
    for problem in problems:
        head, sep, message = problem.partition(" ")
        source, colon, line = head.rpartition(":")
        if not sep or not colon or not line.isdigit():
            key = (problem, "")
            line = ""
        else:
            key = (source, message)
        if key not in lines:
            order.append(key)
            lines[key] = []
        if line:
            lines[key].append(line)
    result = []
    for key in order:
        numbers = lines[key]
        result.append(f"{key[0]}:{_ranges(numbers)} {key[1]}" if numbers else key[0])
    return result


def _ranges(numbers: list[str]) -> str:
    """``3,4,5,9`` as ``3-5,9``."""
    values = [int(n) for n in numbers]
    parts = []
    start = previous = values[0]
    for value in values[1:]:
        if value == previous + 1:
            previous = value
            continue
        parts.append(f"{start}-{previous}" if previous > start else f"{start}")
        start = previous = value
    parts.append(f"{start}-{previous}" if previous > start else f"{start}")
    return ",".join(parts)


class RowProblems(Exception):
    """Every bad field of one row."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class FieldProblem(Exception):
    """One bad field of one row (located by the caller)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def load(path: Path, problems: list[str] | None = None) -> list[Job]:
    """Read a ``.csv`` or ``.jsonl`` (``.json``/``.ndjson``) trace.

    With a ``problems`` list, the problems of the rows go there and the good rows are
    returned (so a caller can add the design's problems and report all at once).
    """
    try:
        return _load(path)
    except TraceError as exc:
        if problems is None:
            raise
        problems.extend(exc.problems)
        return exc.jobs


def _load(path: Path) -> list[Job]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceError([f"{path}: cannot read the trace: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise TraceError([f"{path}: not UTF-8 text ({exc.reason})"]) from exc
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return parse_csv(text, str(path))
    if suffix in (".jsonl", ".ndjson", ".json"):
        return parse_jsonl(text, str(path))
    raise TraceError([f"{path}: unknown trace format {suffix or '(no suffix)'}; use .csv or .jsonl"])


def parse_csv(text: str, source: str = "trace.csv") -> list[Job]:
    lines = [line for line in text.splitlines()]
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[str] = []
    header: list[str] | None = None
    reader = csv.reader(lines, strict=True)
    try:
        for raw in reader:
            number = reader.line_num
            if not raw or not any(cell.strip() for cell in raw) or raw[0].lstrip().startswith("#"):
                continue
            cells = [cell.strip() for cell in raw]
            if header is None:
                header = cells
                unknown = [c for c in header if c not in FIELDS]
                if unknown:  # reported; the rows are still read, so their problems come too
                    problems.append(
                        f"{source}:{number} header: unknown column(s) {', '.join(unknown)}; "
                        f"known: {', '.join(FIELDS)}"
                    )
                missing = [c for c in ("submit", "queue", "runtime") if c not in header]
                if missing:
                    problems.append(f"{source}:{number} header: missing column(s) {', '.join(missing)}")
                    raise TraceError(problems)
                continue
            if len(cells) != len(header):
                problems.append(f"{source}:{number}: {len(cells)} cell(s) where the header has {len(header)}")
                continue
            rows.append(
                (number, {k: v for k, v in zip(header, cells, strict=True) if v != "" and k in FIELDS})
            )
    except csv.Error as exc:
        problems.append(f"{source}:{reader.line_num}: malformed CSV ({exc})")
    if header is None and not problems:
        problems.append(f"{source}: empty trace (expected a header line and one row per job)")
    return _build(rows, source, problems, csv_cells=True)


def parse_jsonl(text: str, source: str = "trace.jsonl") -> list[Job]:
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{number}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(value, dict):
            problems.append(f"{source}:{number}: expected a JSON object, got {type(value).__name__}")
            continue
        unknown = [k for k in value if k not in FIELDS]
        for key in unknown:
            problems.append(f"{source}:{number} {key}: unknown field; known: {', '.join(FIELDS)}")
        rows.append((number, {k: v for k, v in value.items() if k in FIELDS}))
    if not rows and not problems:
        problems.append(f"{source}: empty trace (expected one JSON object per line)")
    return _build(rows, source, problems, csv_cells=False)


def _build(
    rows: Iterable[tuple[int, dict[str, Any]]], source: str, problems: list[str], csv_cells: bool
) -> list[Job]:
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for number, row in rows:
        where = f"{source}:{number}"
        try:
            job = _job(row, number, where, csv_cells)
        except RowProblems as bad:
            problems.extend(f"{where} {problem.field}: {problem.message}" for problem in bad.problems)
            continue
        if job.key in seen:
            problems.append(f"{where} name: job {job.key} already defined on line {seen[job.key]}")
            continue
        seen[job.key] = number
        jobs.append(job)
    if problems:
        raise TraceError(problems, jobs)
    return jobs


def _job(row: Mapping[str, Any], number: int, where: str, csv_cells: bool) -> Job:
    """The job of one row; `RowProblems` with every bad field of it."""
    problems: list[FieldProblem] = []

    def field(read: Callable[[], Any], default: Any) -> Any:
        try:
            return read()
        except FieldProblem as problem:
            problems.append(problem)
            return default

    for required in ("submit", "queue", "runtime"):
        if row.get(required) in (None, ""):
            problems.append(FieldProblem(required, "required"))
    namespace, local_queue = field(lambda: _queue(row.get("queue")), ("", ""))
    name = str(row.get("name") or f"job-{number}")
    submit = field(lambda: duration(row["submit"], "submit"), 0) if row.get("submit") not in (None, "") else 0
    runtime = field(lambda: _runtime(row["runtime"]), 1) if row.get("runtime") not in (None, "") else 1
    checkpoint = field(lambda: _checkpoint(row.get("checkpoint")), None)
    max_execution = field(lambda: _max_execution(row.get("maxExecutionTime")), None)
    priority, priority_class = field(lambda: _priority(row.get("priority")), (0, ""))
    pod_sets = field(lambda: _pod_sets(row, csv_cells), ())
    if problems:
        raise RowProblems(problems)
    job_class = str(row.get("class") or priority_class or "default")
    return Job(
        name=name,
        namespace=namespace,
        queue=local_queue,
        submit=submit,
        runtime=runtime,
        pod_sets=pod_sets,
        priority=priority,
        priority_class=priority_class,
        job_class=job_class,
        checkpoint=checkpoint,
        where=where,
        max_execution=max_execution,
    )


def _queue(queue: Any) -> tuple[str, str]:
    if queue in (None, ""):
        return "", ""  # reported as required
    if not isinstance(queue, str) or queue.count("/") != 1 or not all(queue.split("/")):
        raise FieldProblem("queue", f"expected namespace/localqueue, got {queue!r}")
    namespace, local_queue = queue.split("/")
    return namespace, local_queue


def _runtime(value: Any) -> int:
    runtime = duration(value, "runtime")
    if runtime == 0:
        raise FieldProblem("runtime", "must be positive")
    return runtime


def _checkpoint(value: Any) -> int | None:
    if value in (None, ""):
        return None
    checkpoint = duration(value, "checkpoint")
    if checkpoint == 0:
        raise FieldProblem("checkpoint", "must be positive (leave it out for no checkpoints)")
    return checkpoint


def _max_execution(value: Any) -> int | None:
    """Whole seconds, as upstream's ``maximumExecutionTimeSeconds`` (a fraction is refused)."""
    if value in (None, ""):
        return None
    limit = duration(value, "maxExecutionTime")
    if limit == 0 or limit % SECOND:
        raise FieldProblem("maxExecutionTime", "must be a positive whole number of seconds")
    return limit


def duration(value: Any, field: str) -> int:
    """Seconds (a number) or a Go duration, as non-negative microseconds."""
    if isinstance(value, bool):
        raise FieldProblem(field, f"expected seconds or a duration, got {value!r}")
    try:
        if isinstance(value, int | float):
            micros = int(Fraction(str(value)) * SECOND)
        else:
            text = str(value).strip()
            try:
                micros = int(Fraction(text) * SECOND)
            except (ValueError, ZeroDivisionError):
                micros = intake.parse_duration(text)
    except ValueError as exc:
        raise FieldProblem(field, f"expected seconds or a duration like 90s or 1h30m, got {value!r}") from exc
    if micros < 0:
        raise FieldProblem(field, f"must not be negative (got {value})")
    return micros


def _priority(value: Any) -> tuple[int, str]:
    """An integer priority, or (0, class name) to resolve against the design's priority classes."""
    if value is None or value == "":
        return 0, ""
    if isinstance(value, bool):
        raise FieldProblem("priority", f"expected an integer or a priority class name, got {value!r}")
    if isinstance(value, int):
        return value, ""
    text = str(value).strip()
    try:
        return int(text), ""
    except ValueError:
        if isinstance(value, float):
            raise FieldProblem("priority", f"expected an integer, got {value!r}") from None
        return 0, text


def _pod_sets(row: Mapping[str, Any], csv_cells: bool) -> tuple[PodSetSpec, ...]:
    raw = row.get("podSets")
    if raw is not None:
        if any(row.get(k) not in (None, "") for k in ("count", "minCount", "requests")):
            raise FieldProblem("podSets", "give either podSets or count/minCount/requests, not both")
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise FieldProblem("podSets", f"not a JSON list ({exc.msg})") from exc
        if not isinstance(raw, list) or not raw:
            raise FieldProblem("podSets", "expected a non-empty list of {name, count, minCount, requests}")
        result = []
        names: set[str] = set()
        for index, item in enumerate(raw):
            field = f"podSets[{index}]"
            if not isinstance(item, dict):
                raise FieldProblem(field, "expected an object {name, count, minCount, requests}")
            unknown = [k for k in item if k not in ("name", "count", "minCount", "requests")]
            if unknown:
                raise FieldProblem(f"{field}.{unknown[0]}", "unknown field")
            name = str(item.get("name") or ("main" if index == 0 else f"ps{index}"))
            if name in names:
                raise FieldProblem(f"{field}.name", f"duplicate pod set name {name}")
            names.add(name)
            result.append(_pod_set(name, item, field + ".", csv_cells=False))
        return tuple(result)
    if row.get("requests") in (None, ""):
        raise FieldProblem("requests", "required (per-pod requests such as cpu=1;memory=2Gi), or podSets")
    return (_pod_set("main", row, "", csv_cells),)


def _pod_set(name: str, item: Mapping[str, Any], prefix: str, csv_cells: bool) -> PodSetSpec:
    count = _count(item.get("count", 1), prefix + "count", minimum=1)
    min_count = None
    if item.get("minCount") not in (None, ""):
        min_count = _count(item["minCount"], prefix + "minCount", minimum=1)
        if min_count > count:
            raise FieldProblem(prefix + "minCount", f"must not exceed count ({min_count} > {count})")
    requests = _requests(item.get("requests"), prefix + "requests", csv_cells)
    return PodSetSpec(name, count, requests, min_count)


def _count(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise FieldProblem(field, f"expected an integer, got {value!r}")
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise FieldProblem(field, f"expected an integer, got {value!r}") from None
    if number < minimum:
        raise FieldProblem(field, f"must be at least {minimum} (got {number})")
    return number


def _requests(value: Any, field: str, csv_cells: bool) -> dict[str, int]:
    pairs: list[tuple[str, Any]]
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, str) and csv_cells:
        pairs = []
        for part in value.replace(",", ";").split(";"):
            if not part.strip():
                continue
            if "=" not in part:
                raise FieldProblem(
                    field, f"expected resource=quantity pairs like cpu=1;memory=2Gi, got {part!r}"
                )
            key, _, amount = part.partition("=")
            pairs.append((key.strip(), amount.strip()))
    else:
        raise FieldProblem(field, 'expected per-pod requests, e.g. {"cpu": "1", "memory": "2Gi"}')
    if not pairs:
        raise FieldProblem(field, "at least one resource is required")
    result: dict[str, int] = {}
    for resource, amount in pairs:
        if not resource:
            raise FieldProblem(field, "empty resource name")
        try:
            milli = quantity.parse(amount)
        except quantity.QuantityError as exc:
            raise FieldProblem(f"{field}.{resource}", str(exc)) from exc
        if milli < 0:
            raise FieldProblem(f"{field}.{resource}", f"must not be negative (got {amount})")
        result[resource] = resource_units(resource, milli)
    return result
