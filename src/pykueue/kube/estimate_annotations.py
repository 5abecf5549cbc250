"""Kubernetes mode: each pending Workload carries its estimated start as an annotation.

    pykueue.io/estimated-start: '{"at": "...", "low": "...", "high": "...", "basis": "..."}'

Estimates move a little at every refresh; writing each move would put a write
per pending workload per refresh on the API server. So a Workload is written
only when its estimate *moved meaningfully* since the value it carries:

* it carries none (or one that cannot be read), or
* the new ``at`` differs from the written one by more than
  ``max(min_move_seconds, relative_move * time from now to the written at)``:
  a start an hour away is rewritten when it moves by more than 6 minutes,
  one a day away by more than 2.4 hours (with the defaults, 5 min and 10 %).

At most ``max_writes`` Workloads are written per refresh (soonest starts
first); the rest wait for the next refresh. A write is a plain update of the
cached object; a conflict (someone wrote first) is skipped and retried by a
later refresh. The annotation is left as it was when the workload is admitted:
it means something only while the workload is pending.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from pykueue.engine import forecast, intake
from pykueue.errors import Conflict, NotFound
from pykueue.reconcilers import estimating
from pykueue.store import base
from pykueue.store.base import Key, Manifest, Store

log = logging.getLogger(__name__)

ANNOTATION = "pykueue.io/estimated-start"


@dataclass
class AnnotationWriter:
    store: Store
    cached: Callable[[Key], Manifest | None]
    min_move_seconds: float = 300.0
    relative_move: float = 0.1
    max_writes: int = 100

    def due(self, obj: Manifest, estimate: forecast.Estimate, now: int) -> bool:
        """Has ``estimate`` moved meaningfully from what ``obj`` carries?"""
        written = _written_at(obj)
        if written is None:
            return True
        allowed = max(self.min_move_seconds * 1e6, self.relative_move * max(written - now, 0))
        return abs(estimate.at - written) > allowed

    async def write(self, estimates: Mapping[str, forecast.Estimate], now: int) -> int:
        """Write the annotations that are due; the number written."""
        due: list[tuple[int, Key, Manifest, forecast.Estimate]] = []
        for key_text, estimate in estimates.items():
            namespace, _, name = key_text.partition("/")
            key = Key("Workload", namespace, name)
            obj = self.cached(key)
            # An unknown start is not written: the annotation would only say "nothing yet".
            if obj is not None and estimate.known and self.due(obj, estimate, now):
                due.append((estimate.at, key, obj, estimate))
        due.sort(key=lambda item: (item[0], str(item[1])))
        # An estimate is for reading: it waits for spare capacity of a rate limit, and the
        # Workload status writes that admit and evict keep the burst.
        spare = base.request_spare_only.set(True)
        try:
            written = await self._write_due(due)
        finally:
            base.request_spare_only.reset(spare)
        if len(due) > self.max_writes:
            log.info("estimated-start annotations: %d more are due next refresh", len(due) - self.max_writes)
        return written

    async def _write_due(self, due: list[tuple[int, Key, Manifest, forecast.Estimate]]) -> int:
        written = 0
        for _, _key, obj, estimate in due[: self.max_writes]:
            meta = dict(obj.get("metadata") or {})
            annotations = dict(meta.get("annotations") or {})
            annotations[ANNOTATION] = json.dumps(estimating.as_dict(estimate), sort_keys=True)
            meta["annotations"] = annotations
            try:
                await self.store.update({**obj, "metadata": meta})
            except (Conflict, NotFound):
                continue  # changed or gone since it was cached: a later refresh looks again
            written += 1
        return written


FIELDS = ("at", "low", "high", "basis")


def written(obj: Manifest) -> dict[str, str] | None:
    """The estimate ``obj`` carries (what `pykueue dashboard` shows), or None when none can be read."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not text:
        return None
    try:
        found = json.loads(text)
        estimate = {name: str(found[name]) for name in FIELDS}
        for name in FIELDS[:3]:
            datetime.fromisoformat(estimate[name].replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError):
        return None
    return estimate


def _written_at(obj: Manifest) -> int | None:
    estimate = written(obj)
    if estimate is None:
        return None
    return intake.micros(datetime.fromisoformat(estimate["at"].replace("Z", "+00:00")))
