"""The engine's settings derived from the typed Kueue `Configuration`.

The file is read once, by `pykueue.api.configuration` (every place a configuration
comes from: the controller's ``--config``, the standalone server's config, a
scenario's ``config``, a simulator design); `engine_config` only derives, so it
refuses nothing: whatever the typed object holds was checked there.

    fairSharing            enable, preemptionStrategies
    admissionFairSharing   usageHalfLifeTime, usageSamplingInterval, resourceWeights
    featureGates           upstream's gate names -> true/false
    waitForPodsReady       timeout, recoveryTimeout, blockAdmission, requeuingStrategy
                           (v1beta1: enable, off unless true; blockAdmission defaults to it)
    pykueue                nominalFirst, preemptionContract, preemptionCost, requeueOrder: pykueue's
                           own engine options
    resources              excludeResourcePrefixes, transformations
"""

from __future__ import annotations

from typing import Any

from pykueue.api import configuration as api
from pykueue.engine import intake
from pykueue.engine.config import (
    AdmissionFairSharing,
    EngineConfig,
    FairSharing,
    Resources,
    ResourceTransformation,
    WaitForPodsReady,
)


def engine_config(cfg: api.Configuration, nominal_first_default: bool = True, **extra: Any) -> EngineConfig:
    """The engine configuration ``cfg`` describes. ``nominal_first_default`` is the caller's default
    for `EngineConfig.nominal_first` when the file's ``pykueue`` section does not set it;
    ``extra`` sets EngineConfig fields beyond the file (command-line flags), and wins."""
    gates = dict(cfg.feature_gates)
    wait = wait_for_pods_ready(cfg)
    if gates.get("DisableWaitForPodsReady"):
        wait = None  # upstream's kill switch wins over the configuration
    own = cfg.pykueue
    fields: dict[str, Any] = {
        "fair_sharing": FairSharing(
            enable=cfg.fair_sharing.enable,
            preemption_strategies=tuple(cfg.fair_sharing.preemption_strategies)
            or FairSharing().preemption_strategies,
        ),
        "admission_fair_sharing": _admission_fair_sharing(cfg.admission_fair_sharing),
        "feature_gates": gates,
        "wait_for_pods_ready": wait,
        "nominal_first": nominal_first_default if own.nominal_first is None else own.nominal_first,
        "resources": resources(cfg.resources),
    }
    if own.preemption_contract is not None:
        fields["default_contract"] = own.preemption_contract
    if own.preemption_cost is not None:
        fields["default_preemption_cost"] = own.preemption_cost
    if own.reservation is not None:
        fields["default_reservation"] = own.reservation
    if own.requeue_order is not None:
        fields["requeue_order"] = own.requeue_order
    fields.update(extra)
    return EngineConfig(**fields)


def _admission_fair_sharing(section: api.AdmissionFairSharing | None) -> AdmissionFairSharing | None:
    if section is None:
        return None
    return AdmissionFairSharing(
        enable=True,
        usage_half_life=intake.parse_duration(section.usage_half_life_time),
        sampling_interval=intake.parse_duration(section.usage_sampling_interval),
        resource_weights=dict(section.resource_weights),
    )


def wait_for_pods_ready(cfg: api.Configuration) -> WaitForPodsReady | None:
    """``waitForPodsReady`` with upstream's defaults, or None when it is off.

    v1beta2 has no switch: the section present turns it on, ``blockAdmission`` defaults
    to false. v1beta1's ``enable`` defaults to false and ``blockAdmission`` to ``enable``,
    as upstream's conversion to v1beta2 sets them. Sections without an apiVersion (a
    scenario, the standalone server) read as v1beta2 and take v1beta1's ``enable``
    too, on unless false.
    """
    section = cfg.wait_for_pods_ready
    if section is None:
        return None
    v1beta1 = cfg.api_version == api.V1BETA1
    enable = section.enable if section.enable is not None else not v1beta1
    if not enable:
        return None
    timeout = intake.parse_duration(section.timeout)
    recovery = (
        timeout if section.recovery_timeout is None else intake.parse_duration(section.recovery_timeout)
    )
    block = section.block_admission if section.block_admission is not None else v1beta1
    strategy = section.requeuing_strategy
    return WaitForPodsReady(
        timeout=timeout,
        recovery_timeout=recovery or None,  # "0s" switches the recovery timeout off, as upstream
        block_admission=block,
        requeuing_timestamp=strategy.timestamp,
        backoff_base_seconds=strategy.backoff_base_seconds,
        backoff_max_seconds=strategy.backoff_max_seconds,
        backoff_limit_count=strategy.backoff_limit_count,
    )


def resources(section: api.Resources) -> Resources:
    """``resources``' quota side: excluded prefixes and transformations."""
    return Resources(
        tuple(section.exclude_resource_prefixes),
        tuple(
            ResourceTransformation(
                rule.input, rule.strategy == "Retain", tuple(sorted(rule.outputs.items())), rule.multiply_by
            )
            for rule in section.transformations
        ),
    )
