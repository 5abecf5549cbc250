"""The controller's ``--config``: upstream Kueue's `Configuration` file, as its users write it.

    apiVersion: config.kueue.x-k8s.io/v1beta2      (or v1beta1)
    kind: Configuration
    waitForPodsReady: {timeout: 5m, blockAdmission: true, requeuingStrategy: {...}}
    fairSharing: {...}
    admissionFairSharing: {...}
    featureGates: {PrioritizePreemptorWorkloads: true}

The file is read once, into the typed `pykueue.api.configuration.Configuration`
(which refuses a key upstream does not have, naming the file and the key); the
engine's sections become an `EngineConfig` (`pykueue.engine.configuration`).
Upstream's other sections are accepted as they are (a Configuration written for
upstream Kueue loads unchanged) and listed in `Loaded.unused`, which the
controller logs, so nothing is ignored silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pykueue.api import configuration as api
from pykueue.engine import configuration
from pykueue.engine.config import EngineConfig


@dataclass(frozen=True)
class Loaded:
    engine: EngineConfig
    configuration: api.Configuration  # the whole file, typed, for the job side
    unused: tuple[str, ...] = ()
    # The job framework's sections present (the controller reads them; the simulator does not).
    job_sections: tuple[str, ...] = ()


def load(path: Path, **engine_options: Any) -> Loaded:
    """Read and check a Configuration file; ``engine_options`` set EngineConfig fields beyond it."""
    return of(api.load(path), **engine_options)


def parse(doc: Any, source: str, **engine_options: Any) -> Loaded:
    return of(api.parse(doc, source), **engine_options)


def of(cfg: api.Configuration, **engine_options: Any) -> Loaded:
    """What each side of pykueue takes of a Configuration already read."""
    sections = cfg.sections()
    return Loaded(
        configuration.engine_config(cfg, **engine_options),
        cfg,
        tuple(cfg.ignored_sections()),
        tuple(name for name in sections if name in api.JOB_SECTIONS),
    )
