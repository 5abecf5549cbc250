"""Running `make diff-upstream`'s cases on several workers (`--workers K`), each with its own API server
(etcd + kube-apiserver) and oracle, and putting their reports back together.

A case's result depends only on its seed and index (the generator is seeded per case and every worker's
API server is emptied between cases), never on which worker plays it or when; so the cases are dealt out
round-robin (`deal`), each worker plays its share in order and shrinks its own divergences, and the
driver prints every case's lines in case order (`Report`) and sums the counts, which do not depend on
the order. A run with `--workers 1` and one with `--workers K` print the same lines.
"""

from __future__ import annotations

import importlib
import multiprocessing
import queue
import signal
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CaseReport:
    """What one case printed, and whether it diverged (and was documented)."""

    index: int
    lines: tuple[str, ...]
    divergent: bool = False
    documented: bool = False


def deal(first: int, cases: int, workers: int) -> list[list[int]]:
    """The case indexes of each worker: round-robin, so that every worker's share spans the whole run."""
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, not {workers}")
    shares: list[list[int]] = [[] for _ in range(min(workers, max(cases, 1)))]
    for n, index in enumerate(range(first, first + cases)):
        shares[n % len(shares)].append(index)
    return shares


@dataclass
class Report:
    """Prints case reports in case order as they arrive in any order, and counts them."""

    first: int
    cases: int
    emit: Callable[[str], None] = print
    divergences: int = 0
    documented: int = 0
    _waiting: dict[int, CaseReport] = field(default_factory=dict)
    _next: int = -1

    def __post_init__(self) -> None:
        self._next = self.first

    def add(self, report: CaseReport) -> None:
        if not self.first <= report.index < self.first + self.cases or report.index in self._waiting:
            raise ValueError(f"case {report.index} is not expected (or came twice)")
        if report.index < self._next:
            raise ValueError(f"case {report.index} came twice")
        self._waiting[report.index] = report
        self.divergences += report.divergent
        self.documented += report.documented
        while self._next in self._waiting:
            for line in self._waiting.pop(self._next).lines:
                self.emit(line)
            self._next += 1

    @property
    def complete(self) -> bool:
        return self._next == self.first + self.cases

    def last_line(self) -> str:
        return f"{self.cases} cases, {self.divergences} divergences ({self.documented} documented)"

    @property
    def exit_status(self) -> int:
        return 0 if self.divergences == self.documented else 1


# A worker plays its indexes on its own Upstream: play_share(indexes) yields one CaseReport per index.
PlayShare = Callable[[list[int]], Iterable[CaseReport]]


def resolve(ref: str) -> Callable[..., PlayShare]:
    """ "module:function", imported in the worker (a function of `python -m`'s __main__ is not picklable)."""
    module, _, name = ref.partition(":")
    made: Callable[..., PlayShare] = getattr(importlib.import_module(module), name)
    return made


def _worker(make: str, options: dict[str, Any], indexes: list[int], out: Any) -> None:
    """In a worker process: SIGTERM ends it through its `finally` blocks, so its API server and oracle
    are stopped; SIGINT (^C in the terminal) reaches every worker at once and does the same."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for report in resolve(make)(**options)(indexes):
            out.put(("case", report))
        out.put(("done", None))
    except Exception:  # reported to the driver, which stops the run; ^C and SIGTERM just end the worker
        out.put(("error", traceback.format_exc()))
        raise


def run_parallel(make: str, options: dict[str, Any], shares: list[list[int]], report: Report) -> None:
    """Play each share on a worker process (`resolve(make)(**options)` builds its player there), feeding
    `report`; a worker that fails ends the run (the others are stopped) with its traceback."""
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no state or thread of the driver's
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(make, options, share, results)) for share in shares]
    for proc in procs:
        proc.start()
    try:
        for kind, payload in _messages(results, procs):
            if kind == "case":
                report.add(payload)
            elif kind == "error":
                raise RuntimeError(f"a worker failed:\n{payload}")
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=60)


def _messages(results: Any, procs: list[Any]) -> Iterator[tuple[str, Any]]:
    done = 0
    while done < len(procs):
        try:
            kind, payload = results.get(timeout=5)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a worker exited ({dead[0].exitcode}) without reporting") from None
            continue
        if kind == "done":
            done += 1
        yield kind, payload
