"""The controller's ``--config``: upstream Kueue's `Configuration` file, as its users write it.

    apiVersion: config.kueue.x-k8s.io/v1beta2      (or v1beta1)
    kind: Configuration
    waitForPodsReady: {timeout: 5m, blockAdmission: true, requeuingStrategy: {...}}
    fairSharing: {...}
    admissionFairSharing: {...}
    featureGates: {PrioritizePreemptorWorkloads: true}

The engine's sections become an `EngineConfig` (`pykueue.engine.configuration`);
upstream's other sections are accepted as they are (a Configuration written for
upstream Kueue loads unchanged) and listed in `Loaded.unused`, which the
controller logs, so nothing is ignored silently. A key upstream does not have
is an error naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pykueue.api.configuration import quota_check_problem
from pykueue.engine import configuration
from pykueue.engine.config import EngineConfig
from pykueue.errors import InputError

API_VERSIONS = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")
# The sections the job framework reads (`pykueue.api.configuration`, which checks them).
JOB_SECTIONS = frozenset(
    {
        "namespace",
        "manageJobsWithoutQueueName",
        "managedJobsNamespaceSelector",
        "integrations",
        "resources",
        "multiKueue",
        "objectRetentionPolicies",
    }
)
# Upstream's Configuration sections pykueue accepts without acting on them (yet).
OTHER_SECTIONS = frozenset(
    {
        "internalCertManagement",
        "clientConnection",
        "queueVisibility",
        "health",
        "metrics",
        "webhook",
        "leaderElection",
        "controller",
        "pprofBindAddress",
        "admissionChecks",
    }
)


@dataclass(frozen=True)
class Loaded:
    engine: EngineConfig
    raw: dict[str, Any] = field(default_factory=dict)  # the whole document, for other readers
    unused: tuple[str, ...] = ()
    # The job framework's sections present (the controller reads them; the simulator does not).
    job_sections: tuple[str, ...] = ()


def load(path: Path, **engine_options: Any) -> Loaded:
    """Read and check a Configuration file; ``engine_options`` set EngineConfig fields beyond it."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the configuration: {exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from None
    return parse(doc, str(path), **engine_options)


def parse(doc: Any, source: str, **engine_options: Any) -> Loaded:
    if not isinstance(doc, dict):
        raise InputError(f"{source}: a Configuration must be a mapping")
    if doc.get("kind") != "Configuration" or doc.get("apiVersion") not in API_VERSIONS:
        raise InputError(
            f"{source}: expected kind Configuration of apiVersion {' or '.join(API_VERSIONS)}, "
            f"got {doc.get('kind')!r} {doc.get('apiVersion')!r}"
        )
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
    known = configuration.ENGINE_KEYS | JOB_SECTIONS | OTHER_SECTIONS
    unknown = sorted(str(k) for k in body if k not in known)
    if unknown:
        raise InputError(f"{source}: unknown key(s): {', '.join(unknown)}")
    engine_part = {k: v for k, v in body.items() if k in configuration.ENGINE_KEYS}
    strategy = quota_check_problem((body.get("resources") or {}).get("quotaCheckStrategy"))
    if strategy is not None:  # read by nobody here: refused rather than dropped
        raise InputError(f"{source}: resources.quotaCheckStrategy: {strategy}")
    # resources: the quota side (excluded prefixes, transformations) is the engine's; the
    # job side reads deviceClassMappings (DRA) from the same section.
    quota_side = {
        k: v
        for k, v in (body.get("resources") or {}).items()
        if k in ("excludeResourcePrefixes", "transformations")
    }
    if quota_side:
        engine_part[configuration.RESOURCES] = quota_side
    engine = configuration.engine_config(
        engine_part, source, allowed=configuration.ENGINE_KEYS | {configuration.RESOURCES}, **engine_options
    )
    unused = tuple(sorted(str(k) for k in body if k in OTHER_SECTIONS))
    job_sections = tuple(sorted(str(k) for k in body if k in JOB_SECTIONS))
    return Loaded(engine, doc, unused, job_sections)
