"""The ``limits`` section of the standalone config: what one tenant or one job may take.

    limits:
      requestsPerSecond: 20       a tenant's sustained request rate (token bucket)   -> 429
      burst: 100                  requests a tenant may make at once before the rate counts
      maxObjects: 5000            Jobs, JobSets and Workloads of its own in a tenant's namespaces -> 429
      maxPodsPerJob: 256          pods one Job (parallelism) or JobSet may run at once -> 422
      defaultRequests: {cpu: 100m, memory: 128Mi}
                                  a container's request for a resource it names neither a
                                  request nor a limit for (a LimitRange defaultRequest)

Admins (and the server's own user) are not rate- or count-limited: they set the limits.
The pod cap and the default requests apply to everyone, as a LimitRange would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pykueue.api import quantity
from pykueue.errors import InputError

SECTION = "limits"


def _default_requests() -> dict[str, str]:
    # Small enough that the machine-sized `main` queue (one CPU of quota per core) still
    # admits ten such pods per core, large enough that sixty of them show up as used.
    return {"cpu": "100m", "memory": "128Mi"}


@dataclass(frozen=True)
class Limits:
    requests_per_second: float = 20.0
    burst: int = 100
    max_objects: int = 5000
    max_pods_per_job: int = 256
    default_requests: dict[str, str] = field(default_factory=_default_requests)


KEYS: dict[str, type] = {
    "requestsPerSecond": float,
    "burst": int,
    "maxObjects": int,
    "maxPodsPerJob": int,
    "defaultRequests": dict,
}


def load(path: Path, raw: Any) -> Limits:
    """The ``limits`` section of the config at ``path`` (every key optional)."""
    if raw is None:
        return Limits()
    if not isinstance(raw, dict):
        raise InputError(f"{path}: {SECTION} must be a mapping")
    for key, value in raw.items():
        wanted = KEYS.get(str(key))
        if wanted is None:
            raise InputError(f"{path}: {SECTION}.{key} is not a known key ({', '.join(KEYS)})")
        ok = isinstance(value, wanted) or (wanted is float and isinstance(value, int))
        if not ok or isinstance(value, bool):
            raise InputError(f"{path}: {SECTION}.{key} must be a {wanted.__name__}, not {value!r}")
        if wanted is not dict and value <= 0:
            raise InputError(f"{path}: {SECTION}.{key} must be more than 0, not {value!r}")
    defaults = Limits()
    requests = raw.get("defaultRequests", defaults.default_requests)
    return Limits(
        requests_per_second=float(raw.get("requestsPerSecond", defaults.requests_per_second)),
        burst=int(raw.get("burst", defaults.burst)),
        max_objects=int(raw.get("maxObjects", defaults.max_objects)),
        max_pods_per_job=int(raw.get("maxPodsPerJob", defaults.max_pods_per_job)),
        default_requests=_requests(path, requests),
    )


def _requests(path: Path, raw: dict[Any, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in raw.items():
        where = f"{path}: {SECTION}.defaultRequests.{name}"
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise InputError(f"{where} must be a quantity such as 500m or 1Gi, not {value!r}")
        try:
            if quantity.parse(value) < 0:
                raise ValueError("negative")
        except ValueError:
            raise InputError(f"{where} must be a quantity such as 500m or 1Gi, not {value!r}") from None
        out[str(name)] = str(value)
    return out
