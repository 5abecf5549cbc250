"""``apply``'s decode and validate steps, off the event loop and in bounded chunks.

Reading YAML and checking manifests is pure CPU: 3,000 Jobs take seconds. Run on the
event loop, one tenant's large apply kept every other request (and the controllers)
waiting that long. Here each step runs in a worker thread, a chunk at a time
(files grouped up to CHUNK_BYTES of text, documents CHUNK_DOCUMENTS at a time), so
the loop gets its turn between chunks and, by the interpreter's thread switching,
within them. At most PARALLEL_APPLIES large applies are parsed at once: more would
only share the same cores slower, and hold the memory of all of them.

The outcome is `decode` and `validate`'s, problems and their order
included: every chunk is validated, and the problems of all are raised together.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from pykueue.api import manifests
from pykueue.errors import FieldProblem, InputError, ParseError, ValidationError
from pykueue.standalone.http import owners
from pykueue.standalone.http.inputs import MAX_OBJECT_BYTES, object_size
from pykueue.store.base import Manifest

CHUNK_BYTES = 256 * 1024
CHUNK_DOCUMENTS = 200
PARALLEL_APPLIES = 1

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
JOB_KINDS = ("Job", "JobSet")  # what runs on this machine, queued with the queue label
NOTHING_TO_APPLY = "nothing to apply: the input holds no documents"

# One semaphore per event loop: a semaphore belongs to the loop it was first used on.
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


class TooLarge(InputError):
    """One object is larger than an object may be (HTTP 413)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class Document:
    source: str  # file#N
    manifest: Manifest  # as it will be stored


def decode(files: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """(source, raw document) for every document of every (name, text) file."""
    out: list[tuple[str, Any]] = []
    for name, text in files:
        try:
            docs = list(yaml.load_all(text, Loader=_Loader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ParseError(f"{name}:{where}: not valid YAML: {problem}") from None
        index = 0
        for doc in docs:
            if doc is None:
                continue
            index += 1
            if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
                items = doc.get("items") or []
                if not isinstance(items, list):
                    raise ParseError(f"{name}#{index}: items of a {doc.get('kind')} must be a list")
                for sub, item_doc in enumerate(items, start=1):
                    out.append((f"{name}#{index}.{sub}", item_doc))
            else:
                out.append((f"{name}#{index}", doc))
    if not out:
        raise ParseError(NOTHING_TO_APPLY)
    return out


def validate(raw: list[tuple[str, Any]]) -> list[Document]:
    """Every document parsed as submitted (`manifests.SUBMITTED`); all problems of all documents together."""
    problems: list[FieldProblem] = []
    too_large: list[str] = []
    documents: list[Document] = []
    for source, doc in raw:
        try:
            parsed = manifests.parse_object(doc, source=source, options=manifests.SUBMITTED)
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        stored = manifests.to_manifest(parsed)
        size = object_size(stored)
        if size > MAX_OBJECT_BYTES:
            too_large.append(
                f"{source} {manifests.object_ref(stored)}: {size} bytes; an object may be at most {MAX_OBJECT_BYTES}"
            )
            continue
        owners.strip_server_annotations(stored)
        meta = stored.setdefault("metadata", {})
        if stored.get("kind") in (*JOB_KINDS, "Workload", "LocalQueue", "LimitRange") and not meta.get(
            "namespace"
        ):
            meta["namespace"] = "default"
        for field_name in ("resourceVersion", "uid", "generation", "creationTimestamp"):
            meta.pop(field_name, None)
        stored.pop("status", None)  # status is the controllers' to write, never the user's
        documents.append(Document(source, stored))
    if too_large:
        raise TooLarge(too_large)
    if problems:
        raise ValidationError(problems)
    return documents


def _semaphore() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(PARALLEL_APPLIES)
    return slots


def _file_chunks(files: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    chunks: list[list[tuple[str, str]]] = [[]]
    size = 0
    for name, text in files:
        if chunks[-1] and size + len(text) > CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append((name, text))
        size += len(text)
    return chunks


def _decode_chunk(files: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    try:
        return decode(files)
    except ParseError as exc:
        if str(exc) == NOTHING_TO_APPLY:
            return []  # only the whole input must hold a document
        raise


def _validate_chunk(
    raw: list[tuple[str, Any]],
) -> tuple[list[Document], list[str], list[FieldProblem]]:
    try:
        return validate(raw), [], []
    except TooLarge as exc:
        return [], exc.problems, []
    except ValidationError as exc:
        return [], [], list(exc.problems)


async def parse(
    files: Sequence[tuple[str, str]], check_raw: Callable[[list[tuple[str, Any]]], None] | None = None
) -> list[Document]:
    """The validated documents of ``files``; ``check_raw`` sees the decoded ones before validation."""
    async with _semaphore():
        raw: list[tuple[str, Any]] = []
        for chunk in _file_chunks(files):
            raw.extend(await asyncio.to_thread(_decode_chunk, chunk))
        if not raw:
            raise ParseError(NOTHING_TO_APPLY)
        if check_raw is not None:
            check_raw(raw)
        documents: list[Document] = []
        too_large: list[str] = []
        problems: list[FieldProblem] = []
        for start in range(0, len(raw), CHUNK_DOCUMENTS):
            chunk = raw[start : start + CHUNK_DOCUMENTS]
            valid, large, invalid = await asyncio.to_thread(_validate_chunk, chunk)
            too_large.extend(large)
            problems.extend(invalid)
            if not too_large and not problems:
                documents.extend(valid)  # once one fails, nothing is stored: keep no more
        del raw
        if too_large:
            raise TooLarge(too_large)
        if problems:
            raise ValidationError(problems)
        return documents
