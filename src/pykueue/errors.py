"""Every error pykueue raises on purpose, in one tree.

    PykueueError                      base; never shown to a user as a traceback
    ├── InputError                    the user's input is wrong; permanent, fix the input
    │   ├── ParseError                not YAML/JSON, or not the shape of any manifest
    │   ├── ValidationError           a manifest breaks an API rule (carries every FieldProblem)
    │   └── ScenarioError             a scenario file is not valid (unknown step, missing object)
    ├── EngineError                   the engine was asked something impossible (a bug upstream of it)
    └── StoreError                    an object store refused or failed a request
        ├── NotFound                  no such object; permanent for that request
        ├── AlreadyExists             create of a name that is taken; permanent
        ├── Conflict                  stale resourceVersion; retryable after a fresh read
        └── Unavailable               the store cannot answer now (API server down, 429/5xx); retryable

An `InputError` always names where the problem is: the file, the document,
the object (kind/name) and the field path, so that the CLI can print it as
`file#doc Kind/name path: message` without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


class PykueueError(Exception):
    """Base of every error pykueue raises deliberately."""


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One broken rule: which field of which object, and what is wrong with it."""

    path: str
    message: str
    obj: str = ""  # "Kind/name" or "Kind/namespace/name"; empty when unknown
    source: str = ""  # "file#doc"; empty when the object did not come from a file

    def __str__(self) -> str:
        where = " ".join(part for part in (self.source, self.obj) if part)
        field = f" {self.path}" if self.path else ""
        prefix = f"{where}{field}: " if (where or field) else ""
        return f"{prefix}{self.message}".strip()


class InputError(PykueueError):
    """The input is wrong; retrying will not help."""


class ParseError(InputError):
    """The text is not YAML/JSON, or not shaped like a manifest."""


class ValidationError(InputError):
    """One or more API rules are broken; `problems` lists each of them."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ScenarioError(InputError):
    """A scenario file is not valid."""


class EngineError(PykueueError):
    """The engine was given an impossible request; this is a bug in the caller."""


class StoreError(PykueueError):
    """An object store refused or failed a request."""

    retryable = False
    # The API server's answer when it refused with an HTTP status (0: it did not answer).
    http_status = 0
    http_reason = ""
    http_message = ""


class NotFound(StoreError):
    """The object does not exist."""


class AlreadyExists(StoreError):
    """An object with that name exists already."""


class Conflict(StoreError):
    """The write was based on a stale resourceVersion; read again and retry."""

    retryable = True


class Unavailable(StoreError):
    """The store cannot answer now; retry with backoff."""

    retryable = True
