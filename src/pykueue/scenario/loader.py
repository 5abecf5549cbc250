"""Reading a scenario file into checked, typed steps, or a clear error naming the place."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from pykueue.api import manifests
from pykueue.engine import intake
from pykueue.engine.config import (
    KNOWN_GATES,
    AdmissionFairSharing,
    EngineConfig,
    FairSharing,
    WaitForPodsReady,
)
from pykueue.errors import PykueueError, ScenarioError
from pykueue.scenario import shapes

TOP_KEYS = {"format", "name", "description", "now", "config", "objects", "steps", "expect"}
STEP_KEYS = {
    "cycle",
    "settle",
    "advance",
    "apply",
    "delete",
    "finish",
    "evict",
    "expect",
    "checks",
    "podsReady",
    "podsNotReady",
}
CONFIG_KEYS = {"fairSharing", "admissionFairSharing", "featureGates", "pykueue", "waitForPodsReady"}
WAIT_FOR_PODS_READY_KEYS = {"enable", "timeout", "recoveryTimeout", "blockAdmission", "requeuingStrategy"}
REQUEUING_KEYS = {"timestamp", "backoffBaseSeconds", "backoffMaxSeconds", "backoffLimitCount"}
CHECK_UPDATE_KEYS = {"state", "message", "requeueAfterSeconds"}
DEFAULT_NOW = "2026-01-01T00:00:00Z"


@dataclass(slots=True)
class Step:
    kind: str
    value: Any
    path: str


@dataclass(slots=True)
class Scenario:
    path: str
    name: str
    now: int
    config: EngineConfig
    objects: list[Any]
    steps: list[Step]
    expect: dict[str, Any] | None
    checkpoints: list[dict[str, Any]] = field(default_factory=list)


def load(path: str | Path) -> Scenario:
    """Read and check a whole scenario file; raise ScenarioError naming file and path."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: not valid YAML: {exc}") from exc
    return parse(doc, source)


def parse(doc: Any, source: str) -> Scenario:
    if not isinstance(doc, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping")
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{source}: unknown top-level key(s): {', '.join(map(str, unknown))}")
    if doc.get("format") != 1:
        raise ScenarioError(f"{source} format: must be 1, got {doc.get('format')!r}")
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{source} name: required, a short sentence")
    now = _time(doc.get("now", DEFAULT_NOW), f"{source} now")
    config = _config(doc.get("config") or {}, source)
    objects = _objects(doc.get("objects") or [], source, "objects")
    raw_steps = doc.get("steps")
    steps = _steps([{"cycle": 1}] if raw_steps is None else raw_steps, source)
    expect = doc.get("expect")
    if expect is not None:
        _check_expect(expect, f"{source} expect")
    return Scenario(source, name, now, config, objects, steps, expect)


def _time(value: Any, where: str) -> int:
    if isinstance(value, datetime):
        return intake.micros(value)
    if not isinstance(value, str):
        raise ScenarioError(f"{where}: expected an RFC 3339 time like {DEFAULT_NOW}")
    try:
        return intake.micros(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError as exc:
        raise ScenarioError(f"{where}: {value!r} is not an RFC 3339 time") from exc


def _config(raw: Any, source: str) -> EngineConfig:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source} config: must be a mapping")
    if "resources" in raw:
        raise ScenarioError(f"{source} config.resources: {shapes.UNSUPPORTED}")
    unknown = sorted(set(raw) - CONFIG_KEYS)
    if unknown:
        raise ScenarioError(f"{source} config: unknown key(s): {', '.join(map(str, unknown))}")
    fs_raw = raw.get("fairSharing") or {}
    if not isinstance(fs_raw, dict):
        raise ScenarioError(f"{source} config.fairSharing: must be a mapping")
    _only(fs_raw, {"enable", "preemptionStrategies"}, f"{source} config.fairSharing")
    strategies = fs_raw.get("preemptionStrategies")
    fair = FairSharing(
        enable=bool(fs_raw.get("enable", False)),
        preemption_strategies=tuple(strategies) if strategies else FairSharing().preemption_strategies,
    )
    for i, strategy in enumerate(fair.preemption_strategies):
        if strategy not in ("LessThanOrEqualToFinalShare", "LessThanInitialShare"):
            raise ScenarioError(
                f"{source} config.fairSharing.preemptionStrategies[{i}]: unknown {strategy!r}"
            )
    afs: AdmissionFairSharing | None = None
    afs_raw = raw.get("admissionFairSharing")
    if afs_raw is not None:
        if not isinstance(afs_raw, dict):
            raise ScenarioError(f"{source} config.admissionFairSharing: must be a mapping")
        _only(
            afs_raw,
            {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"},
            f"{source} config.admissionFairSharing",
        )
        try:
            afs = AdmissionFairSharing(
                enable=True,
                usage_half_life=intake.parse_duration(str(afs_raw.get("usageHalfLifeTime", "168h"))),
                sampling_interval=intake.parse_duration(str(afs_raw.get("usageSamplingInterval", "5m"))),
                resource_weights={
                    str(k): float(v) for k, v in (afs_raw.get("resourceWeights") or {}).items()
                },
            )
        except ValueError as exc:
            raise ScenarioError(f"{source} config.admissionFairSharing: {exc}") from exc
    gates = raw.get("featureGates") or {}
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        raise ScenarioError(f"{source} config.featureGates: must map gate names to true/false")
    unknown_gates = sorted(str(name) for name in gates if name not in KNOWN_GATES)
    if unknown_gates:
        raise ScenarioError(
            f"{source} config.featureGates: unknown gate(s): {', '.join(unknown_gates)} "
            "(names are upstream Kueue's feature gates)"
        )
    wait_for_pods_ready = _wait_for_pods_ready(
        raw.get("waitForPodsReady"), f"{source} config.waitForPodsReady"
    )
    if gates.get("DisableWaitForPodsReady"):
        wait_for_pods_ready = None  # upstream's kill switch wins over the configuration
    return EngineConfig(
        fair_sharing=fair,
        admission_fair_sharing=afs,
        feature_gates=dict(gates),
        nominal_first=_own_options(raw.get("pykueue"), source),
        wait_for_pods_ready=wait_for_pods_ready,
    )


def _only(raw: dict[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s): {', '.join(unknown)}")


def _wait_for_pods_ready(raw: Any, where: str) -> WaitForPodsReady | None:
    """``config.waitForPodsReady`` with upstream's defaults; absent or ``enable: false`` is off.

    The v1beta1 ``enable`` switch is accepted; v1beta2 has none (present means on).
    """
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: must be a mapping")
    _only(raw, WAIT_FOR_PODS_READY_KEYS, where)
    enable = raw.get("enable", True)
    if not isinstance(enable, bool):
        raise ScenarioError(f"{where}.enable: must be true or false")
    if not enable:
        return None
    timeout = _duration(raw.get("timeout", "30m"), f"{where}.timeout")
    recovery_raw = raw.get("recoveryTimeout")
    recovery: int | None = (
        timeout if recovery_raw is None else _duration(recovery_raw, f"{where}.recoveryTimeout")
    )
    block = raw.get("blockAdmission", False)
    if not isinstance(block, bool):
        raise ScenarioError(f"{where}.blockAdmission: must be true or false")
    strategy = raw.get("requeuingStrategy") or {}
    if not isinstance(strategy, dict):
        raise ScenarioError(f"{where}.requeuingStrategy: must be a mapping")
    _only(strategy, REQUEUING_KEYS, f"{where}.requeuingStrategy")
    timestamp = strategy.get("timestamp", "Eviction")
    if timestamp not in ("Eviction", "Creation"):
        raise ScenarioError(
            f"{where}.requeuingStrategy.timestamp: must be Eviction or Creation, got {timestamp!r}"
        )
    numbers: dict[str, int | None] = {}
    for key, default in (
        ("backoffBaseSeconds", 60),
        ("backoffMaxSeconds", 3600),
        ("backoffLimitCount", None),
    ):
        value = strategy.get(key, default)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ScenarioError(f"{where}.requeuingStrategy.{key}: must be a non-negative integer")
        numbers[key] = value
    return WaitForPodsReady(
        timeout=timeout,
        recovery_timeout=recovery or None,  # "0s" switches the recovery timeout off, as upstream
        block_admission=block,
        requeuing_timestamp=timestamp,
        backoff_base_seconds=numbers["backoffBaseSeconds"] or 0,
        backoff_max_seconds=numbers["backoffMaxSeconds"] or 0,
        backoff_limit_count=numbers["backoffLimitCount"],
    )


def _duration(value: Any, where: str) -> int:
    try:
        result = intake.parse_duration(str(value))
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc
    if result < 0:
        raise ScenarioError(f"{where}: must not be negative")
    return result


def _own_options(raw: Any, source: str) -> bool:
    """``config.pykueue``: pykueue's own engine options, off unless a file asks for them.

    A scenario describes upstream's cycle, so pykueue's departures from it
    (`EngineConfig.nominal_first`) stay off by default here.
    """
    if raw is None:
        return False
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source} config.pykueue: must be a mapping")
    unknown = sorted(set(raw) - {"nominalFirst"})
    if unknown:
        raise ScenarioError(f"{source} config.pykueue: unknown key(s): {', '.join(map(str, unknown))}")
    value = raw.get("nominalFirst", False)
    if not isinstance(value, bool):
        raise ScenarioError(f"{source} config.pykueue.nominalFirst: must be true or false")
    return value


def _objects(raw: Any, source: str, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise ScenarioError(f"{source} {where}: must be a list of manifests")
    result = []
    problems: list[str] = []
    for i, doc in enumerate(raw):
        place = f"{source} {where}[{i}]"
        if not isinstance(doc, dict):
            problems.append(f"{place}: a manifest must be a mapping")
            continue
        shapes.refuse_topology(doc, place)
        try:
            result.append(manifests.parse_object(doc, source=place, options=manifests.RELAXED))
        except PykueueError as exc:
            problems.append(str(exc) if place in str(exc) else f"{place}: {exc}")
    if problems:
        raise ScenarioError("\n".join(problems))
    return result


def _steps(raw: Any, source: str) -> list[Step]:
    if not isinstance(raw, list):
        raise ScenarioError(f"{source} steps: must be a list")
    steps = []
    for i, item in enumerate(raw):
        where = f"{source} steps[{i}]"
        if not isinstance(item, dict) or len(item) != 1:
            raise ScenarioError(f"{where}: a step is a mapping with exactly one key")
        ((kind, value),) = item.items()
        if kind not in STEP_KEYS:
            raise ScenarioError(
                f"{where}: unknown step {kind!r} (expected one of {', '.join(sorted(STEP_KEYS))})"
            )
        steps.append(Step(kind, _step_value(kind, value, where, source, i), where))
    return steps


def _step_value(kind: str, value: Any, where: str, source: str, index: int) -> Any:
    if kind == "cycle":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ScenarioError(f"{where}.cycle: must be a non-negative integer")
        return value
    if kind == "settle":
        return None
    if kind == "advance":
        try:
            return intake.parse_duration(str(value))
        except ValueError as exc:
            raise ScenarioError(f"{where}.advance: {exc}") from exc
    if kind == "apply":
        return _objects(value, source, f"steps[{index}].apply")
    if kind == "delete":
        if not isinstance(value, list):
            raise ScenarioError(f"{where}.delete: must be a list of {{kind, namespace, name}}")
        for j, ref in enumerate(value):
            if not isinstance(ref, dict) or "kind" not in ref or "name" not in ref:
                raise ScenarioError(f"{where}.delete[{j}]: needs kind and name (and namespace)")
            _only(ref, {"kind", "namespace", "name"}, f"{where}.delete[{j}]")
        return value
    if kind in ("finish", "evict", "podsReady", "podsNotReady"):
        if not isinstance(value, list) or not all(isinstance(v, str) and "/" in v for v in value):
            raise ScenarioError(f"{where}.{kind}: must be a list of namespace/name")
        return value
    if kind == "checks":
        return _check_updates(value, f"{where}.checks")
    _check_expect(value, f"{where}.expect")
    return value


@dataclass(frozen=True, slots=True)
class CheckUpdate:
    """One admission check state a `checks` step sets, as the check's controller would."""

    workload: str
    check: str
    state: str
    message: str | None = None
    requeue_after_seconds: int | None = None


def _check_updates(value: Any, where: str) -> list[CheckUpdate]:
    """``{ns/name: {check: State}}``; a check may also be ``{state, message, requeueAfterSeconds}``."""
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: must map namespace/name to {{check-name: state}}")
    updates = []
    for key, checks in value.items():
        here = f"{where}[{key}]"
        if not isinstance(key, str) or "/" not in key:
            raise ScenarioError(f"{here}: the workload must be namespace/name")
        if not isinstance(checks, dict) or not checks:
            raise ScenarioError(f"{here}: must map check names to states")
        for name, spec in checks.items():
            at = f"{here}.{name}"
            desc = spec if isinstance(spec, dict) else {"state": spec}
            _only(desc, CHECK_UPDATE_KEYS, at)
            state = desc.get("state")
            if state not in shapes.CHECK_STATES:
                raise ScenarioError(f"{at}: state {state!r} is not one of {', '.join(shapes.CHECK_STATES)}")
            message = desc.get("message")
            if message is not None and not isinstance(message, str):
                raise ScenarioError(f"{at}.message: must be a string")
            after = desc.get("requeueAfterSeconds")
            if after is not None and (not isinstance(after, int) or isinstance(after, bool) or after < 0):
                raise ScenarioError(f"{at}.requeueAfterSeconds: must be a non-negative integer")
            updates.append(CheckUpdate(key, str(name), state, message, after))
    return updates


def _check_expect(expect: Any, where: str) -> None:
    if not isinstance(expect, dict):
        raise ScenarioError(f"{where}: must be a mapping")
    shapes.check_expect(expect, where)
