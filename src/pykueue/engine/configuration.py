"""Upstream Kueue's `Configuration`, the parts the engine reads, into an `EngineConfig`.

One reader for every place a configuration comes from: a scenario's
``config``, the controller's ``--config`` file (a ``Configuration`` object,
``config.kueue.x-k8s.io/v1beta1`` or ``v1beta2``), standalone's config file.
Each caller says which keys it accepts; a key it does not accept, a value of
the wrong type or a name that does not exist is an `InputError` naming the
place (``where``), never ignored.

    fairSharing            enable, preemptionStrategies
    admissionFairSharing   usageHalfLifeTime, usageSamplingInterval, resourceWeights
    featureGates           upstream's gate names -> true/false
    waitForPodsReady       enable (v1beta1), timeout, recoveryTimeout, blockAdmission,
                           requeuingStrategy {timestamp, backoffBaseSeconds,
                           backoffMaxSeconds, backoffLimitCount}
    pykueue                nominalFirst, preemptionContract, requeueOrder: pykueue's own engine options
    resources              excludeResourcePrefixes, transformations (only where the caller
                           allows the key: the controllers read the section elsewhere)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pykueue.api import governance
from pykueue.api.quantity import parse as parse_milli
from pykueue.engine import gate_support, intake
from pykueue.engine.config import (
    CREATION_TIMESTAMP,
    EVICTION_TIMESTAMP,
    KNOWN_GATES,
    AdmissionFairSharing,
    EngineConfig,
    FairSharing,
    Resources,
    ResourceTransformation,
    WaitForPodsReady,
)
from pykueue.errors import InputError

ENGINE_KEYS = frozenset(
    {"fairSharing", "admissionFairSharing", "featureGates", "pykueue", "waitForPodsReady"}
)
WAIT_FOR_PODS_READY_KEYS = {"enable", "timeout", "recoveryTimeout", "blockAdmission", "requeuingStrategy"}
REQUEUING_KEYS = {"timestamp", "backoffBaseSeconds", "backoffMaxSeconds", "backoffLimitCount"}
STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
RESOURCES = "resources"


def engine_config(
    raw: Any,
    where: str,
    allowed: Iterable[str] = ENGINE_KEYS,
    error: type[InputError] = InputError,
    **extra: Any,
) -> EngineConfig:
    """The engine configuration ``raw`` describes; ``extra`` sets EngineConfig fields beyond it."""
    if not isinstance(raw, Mapping):
        raise error(f"{where}: must be a mapping")
    unknown = sorted(str(k) for k in set(raw) - set(allowed))
    if unknown:
        raise error(f"{where}: unknown key(s): {', '.join(unknown)}")
    try:
        gates = _gates(raw.get("featureGates"), f"{where}.featureGates")
        wait = wait_for_pods_ready(raw.get("waitForPodsReady"), f"{where}.waitForPodsReady")
        if gates.get("DisableWaitForPodsReady"):
            wait = None  # upstream's kill switch wins over the configuration
        fields: dict[str, Any] = {
            "fair_sharing": _fair_sharing(raw.get("fairSharing"), f"{where}.fairSharing"),
            "admission_fair_sharing": _admission_fair_sharing(
                raw.get("admissionFairSharing"), f"{where}.admissionFairSharing"
            ),
            "feature_gates": gates,
            "wait_for_pods_ready": wait,
            **_own_options(raw.get("pykueue"), f"{where}.pykueue"),
        }
        if RESOURCES in raw:
            fields["resources"] = resources(raw[RESOURCES], f"{where}.{RESOURCES}")
        fields.update(extra)  # the caller's own settings (command-line flags) win
        return EngineConfig(**fields)
    except InputError as exc:
        if isinstance(exc, error):
            raise
        raise error(str(exc)) from None


def only(raw: Mapping[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(f"{where}: unknown key(s): {', '.join(unknown)}")


def _mapping(raw: Any, where: str) -> Mapping[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: must be a mapping")
    return raw


def _fair_sharing(raw: Any, where: str) -> FairSharing:
    section = _mapping(raw, where)
    only(section, {"enable", "preemptionStrategies"}, where)
    strategies = section.get("preemptionStrategies")
    fair = FairSharing(
        enable=bool(section.get("enable", False)),
        preemption_strategies=tuple(strategies) if strategies else FairSharing().preemption_strategies,
    )
    for i, strategy in enumerate(fair.preemption_strategies):
        if strategy not in STRATEGIES:
            raise InputError(f"{where}.preemptionStrategies[{i}]: unknown {strategy!r}")
    return fair


def _admission_fair_sharing(raw: Any, where: str) -> AdmissionFairSharing | None:
    if raw is None:
        return None
    section = _mapping(raw, where)
    only(section, {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}, where)
    try:
        return AdmissionFairSharing(
            enable=True,
            usage_half_life=intake.parse_duration(str(section.get("usageHalfLifeTime", "168h"))),
            sampling_interval=intake.parse_duration(str(section.get("usageSamplingInterval", "5m"))),
            resource_weights={str(k): float(v) for k, v in (section.get("resourceWeights") or {}).items()},
        )
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from exc


def _gates(raw: Any, where: str) -> dict[str, bool]:
    gates = raw or {}
    if not isinstance(gates, Mapping) or not all(isinstance(v, bool) for v in gates.values()):
        raise InputError(f"{where}: must map gate names to true/false")
    unknown = sorted(str(name) for name in gates if name not in KNOWN_GATES)
    if unknown:
        raise InputError(
            f"{where}: unknown gate(s): {', '.join(unknown)} (names are upstream Kueue's feature gates)"
        )
    gate_support.check(gates, where)  # a value pykueue does not implement is refused by name
    return {str(k): bool(v) for k, v in gates.items()}


def wait_for_pods_ready(raw: Any, where: str) -> WaitForPodsReady | None:
    """``waitForPodsReady`` with upstream's defaults; absent or ``enable: false`` is off.

    The v1beta1 ``enable`` switch is accepted; v1beta2 has none (present means on).
    """
    if raw is None:
        return None
    section = _mapping(raw, where)
    only(section, WAIT_FOR_PODS_READY_KEYS, where)
    enable = section.get("enable", True)
    if not isinstance(enable, bool):
        raise InputError(f"{where}.enable: must be true or false")
    if not enable:
        return None
    timeout = _duration(section.get("timeout", "30m"), f"{where}.timeout")
    recovery_raw = section.get("recoveryTimeout")
    recovery: int | None = (
        timeout if recovery_raw is None else _duration(recovery_raw, f"{where}.recoveryTimeout")
    )
    block = section.get("blockAdmission", False)
    if not isinstance(block, bool):
        raise InputError(f"{where}.blockAdmission: must be true or false")
    strategy = _mapping(section.get("requeuingStrategy"), f"{where}.requeuingStrategy")
    only(strategy, REQUEUING_KEYS, f"{where}.requeuingStrategy")
    timestamp = strategy.get("timestamp", "Eviction")
    if timestamp not in ("Eviction", "Creation"):
        raise InputError(
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
            raise InputError(f"{where}.requeuingStrategy.{key}: must be a non-negative integer")
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


def resources(raw: Any, where: str) -> Resources:
    """``resources``: excludeResourcePrefixes and transformations, as upstream validates them
    (one transformation per input; strategy Retain or Replace)."""
    section = _mapping(raw, where)
    only(section, {"excludeResourcePrefixes", "transformations"}, where)
    prefixes = section.get("excludeResourcePrefixes") or []
    if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
        raise InputError(f"{where}.excludeResourcePrefixes: must be a list of strings")
    rules = section.get("transformations") or []
    if not isinstance(rules, list):
        raise InputError(f"{where}.transformations: must be a list")
    found: list[ResourceTransformation] = []
    for i, rule in enumerate(rules):
        place = f"{where}.transformations[{i}]"
        rule = _mapping(rule, place)
        only(rule, {"input", "strategy", "outputs", "multiplyBy"}, place)
        name = rule.get("input")
        if not isinstance(name, str) or not name:
            raise InputError(f"{place}.input: a resource name is required")
        if any(t.input == name for t in found):
            raise InputError(f"{place}.input: {name!r} is transformed twice")
        strategy = rule.get("strategy", "Retain")
        if strategy not in ("Retain", "Replace"):
            raise InputError(f"{place}.strategy: must be Retain or Replace, got {strategy!r}")
        outputs = _mapping(rule.get("outputs"), f"{place}.outputs")
        factors: list[tuple[str, int]] = []
        for output, value in sorted(outputs.items()):
            try:
                factors.append((str(output), parse_milli(str(value))))
            except ValueError as exc:
                raise InputError(f"{place}.outputs.{output}: {exc}") from None
        multiply_by = rule.get("multiplyBy", "")
        if not isinstance(multiply_by, str):
            raise InputError(f"{place}.multiplyBy: must be a resource name")
        found.append(ResourceTransformation(name, strategy == "Retain", tuple(factors), multiply_by))
    return Resources(tuple(prefixes), tuple(found))


def _duration(value: Any, where: str) -> int:
    try:
        result = intake.parse_duration(str(value))
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from exc
    if result < 0:
        raise InputError(f"{where}: must not be negative")
    return result


def _own_options(raw: Any, where: str) -> dict[str, Any]:
    """``pykueue``: pykueue's own engine options, off unless asked for.

    A scenario and a Configuration describe upstream's cycle, so pykueue's departures
    from it (`EngineConfig.nominal_first`, `EngineConfig.default_contract`) stay off
    unless named here.
    """
    section = _mapping(raw, where)
    only(section, {"nominalFirst", "preemptionContract", "requeueOrder"}, where)
    value = section.get("nominalFirst", False)
    if not isinstance(value, bool):
        raise InputError(f"{where}.nominalFirst: must be true or false")
    options: dict[str, Any] = {"nominal_first": value}
    if "requeueOrder" in section:
        order = section["requeueOrder"]
        if order not in (EVICTION_TIMESTAMP, CREATION_TIMESTAMP):
            raise InputError(f"{where}.requeueOrder: must be Eviction or Creation, not {order!r}")
        options["requeue_order"] = order
    if "preemptionContract" in section:
        try:
            found = governance.contract_setting(section["preemptionContract"], f"{where}.preemptionContract")
        except ValueError as exc:
            raise InputError(str(exc)) from None
        options["default_contract"] = found
    return options
