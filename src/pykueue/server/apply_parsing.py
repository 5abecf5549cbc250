"""``apply``'s decode and validate steps, off the event loop and in bounded chunks.

Reading YAML and checking manifests is pure CPU: 3,000 Jobs take seconds. Run on the
event loop, one tenant's large apply kept every other request (and the controllers)
waiting that long. Here each step runs in a worker thread, a chunk at a time
(files grouped up to CHUNK_BYTES of text, documents CHUNK_DOCUMENTS at a time), so
the loop gets its turn between chunks and, by the interpreter's thread switching,
within them. At most PARALLEL_APPLIES large applies are parsed at once: more would
only share the same cores slower, and hold the memory of all of them.

The outcome is `applying.decode` and `applying.validate`'s, problems and their order
included: every chunk is validated, and the problems of all are raised together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from pykueue.errors import FieldProblem, ParseError, ValidationError
from pykueue.server import applying

CHUNK_BYTES = 256 * 1024
CHUNK_DOCUMENTS = 200
PARALLEL_APPLIES = 1

_slots: asyncio.Semaphore | None = None


def _semaphore() -> asyncio.Semaphore:
    global _slots
    if _slots is None:
        _slots = asyncio.Semaphore(PARALLEL_APPLIES)
    return _slots


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
        return applying.decode(files)
    except ParseError as exc:
        if str(exc) == applying.NOTHING_TO_APPLY:
            return []  # only the whole input must hold a document
        raise


def _validate_chunk(
    raw: list[tuple[str, Any]],
) -> tuple[list[applying.Document], list[str], list[FieldProblem]]:
    try:
        return applying.validate(raw), [], []
    except applying.TooLarge as exc:
        return [], exc.problems, []
    except ValidationError as exc:
        return [], [], list(exc.problems)


async def parse(
    files: Sequence[tuple[str, str]], check_raw: Callable[[list[tuple[str, Any]]], None] | None = None
) -> list[applying.Document]:
    """The validated documents of ``files``; ``check_raw`` sees the decoded ones before validation."""
    async with _semaphore():
        raw: list[tuple[str, Any]] = []
        for chunk in _file_chunks(files):
            raw.extend(await asyncio.to_thread(_decode_chunk, chunk))
        if not raw:
            raise ParseError(applying.NOTHING_TO_APPLY)
        if check_raw is not None:
            check_raw(raw)
        documents: list[applying.Document] = []
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
            raise applying.TooLarge(too_large)
        if problems:
            raise ValidationError(problems)
        return documents
