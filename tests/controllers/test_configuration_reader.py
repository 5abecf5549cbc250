"""One reader of Kueue's Configuration: what the old two readers disagreed on now reads one way."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pykueue.api import configuration
from pykueue.cli import controller_command, manifests_command
from pykueue.engine.configuration import engine_config
from pykueue.errors import InputError, ValidationError
from pykueue.multikueue import controller as multikueue
from pykueue.reconcilers import kueue_configuration, retention
from pykueue.standalone.runtime import Config

HEADER = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def _doc(version: str = "v1beta2", **sections: Any) -> dict[str, Any]:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **sections}


def _refused(doc: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as refused:
        configuration.parse(doc, "config.yaml")
    return str(refused.value)


def test_the_manifests_config_refuses_a_misspelt_gate_and_an_unknown_section() -> None:
    """`pykueue manifests --config` read the file with the job framework's model only, which
    took any gate name and any top-level key; the controller refused both."""
    with pytest.raises(ValidationError, match=r"featureGates: unknown gate\(s\): PartialAdmision"):
        manifests_command.render_yaml(config_text=HEADER + "featureGates: {PartialAdmision: false}\n")
    with pytest.raises(ValidationError, match=r"--config Configuration waitForPodReady: unknown field"):
        manifests_command.render_yaml(config_text=HEADER + "waitForPodReady: {timeout: 5m}\n")


def test_v1beta2_has_no_wait_for_pods_ready_enable() -> None:
    """Upstream decodes its file strictly: ``enable`` exists only in v1beta1."""
    message = _refused(_doc(waitForPodsReady={"enable": True, "timeout": "5m"}))
    assert "config.yaml Configuration waitForPodsReady.enable: v1beta2 has no enable" in message
    on = kueue_configuration.parse(_doc(waitForPodsReady={"timeout": "5m"}), "config.yaml").engine
    assert on.wait_for_pods_ready is not None and not on.wait_for_pods_ready.block_admission


def test_v1beta1_wait_for_pods_ready_is_off_unless_enabled_and_then_blocks_admission() -> None:
    """v1beta1's ``enable`` defaults to false, and ``blockAdmission`` to ``enable`` (upstream's
    conversion to v1beta2); the old reader took the section as on and non-blocking."""
    off = kueue_configuration.parse(_doc("v1beta1", waitForPodsReady={"timeout": "5m"}), "c.yaml").engine
    assert off.wait_for_pods_ready is None
    on = kueue_configuration.parse(
        _doc("v1beta1", waitForPodsReady={"enable": True, "timeout": "5m"}), "c.yaml"
    ).engine
    assert on.wait_for_pods_ready is not None
    assert on.wait_for_pods_ready.block_admission
    assert on.wait_for_pods_ready.timeout == 5 * 60 * 10**6
    unblocked = kueue_configuration.parse(
        _doc("v1beta1", waitForPodsReady={"enable": True, "blockAdmission": False}), "c.yaml"
    ).engine
    assert unblocked.wait_for_pods_ready is not None and not unblocked.wait_for_pods_ready.block_admission


def test_every_duration_reads_the_same_go_durations() -> None:
    """waitForPodsReady took 250ms while multiKueue and objectRetentionPolicies refused it."""
    cfg = configuration.parse(
        _doc(
            waitForPodsReady={"timeout": "1m500ms"},
            multiKueue={"workerLostTimeout": "1m500ms"},
            objectRetentionPolicies={"workloads": {"afterFinished": "1m500ms"}},
        ),
        "config.yaml",
    )
    wait = engine_config(cfg).wait_for_pods_ready
    assert wait is not None and wait.timeout == 60_500_000
    assert multikueue.settings_of(cfg.multi_kueue).worker_lost_timeout == timedelta(seconds=60.5)
    assert retention.policy_of(cfg.object_retention_policies).after_finished == timedelta(seconds=60.5)


def test_a_negative_duration_is_refused_everywhere() -> None:
    """admissionFairSharing took ``-1h`` (a negative half-life) where waitForPodsReady refused it."""
    message = _refused(_doc(admissionFairSharing={"usageHalfLifeTime": "-1h"}))
    assert "admissionFairSharing.usageHalfLifeTime: '-1h' is not a duration" in message


def test_upstreams_manager_sections_are_accepted_and_reported_unused() -> None:
    loaded = kueue_configuration.parse(
        _doc(tls={"minVersion": "VersionTLS12"}, visibilityServer={"port": 8082}, webhook={"port": 9443}),
        "config.yaml",
    )
    assert loaded.unused == ("tls", "visibilityServer", "webhook")


def test_the_standalone_config_keeps_nominal_first_on_unless_it_says(tmp_path: Path) -> None:
    """docs/semantics.md: nominal quota first is on in standalone mode; a config file that set
    only fair sharing turned it off."""
    path = tmp_path / "config.yaml"
    path.write_text("fairSharing: {enable: true}\n")
    config = Config.load(path).engine
    assert config.fair_sharing.enable and config.nominal_first
    path.write_text("pykueue: {nominalFirst: false}\n")
    assert not Config.load(path).engine.nominal_first


def test_a_caller_refuses_the_sections_it_does_not_read(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("resources: {excludeResourcePrefixes: [example.com/]}\n")
    with pytest.raises(InputError, match=r"unknown config keys resources"):
        Config.load(path)
    with pytest.raises(ValidationError) as refused:
        configuration.parse_sections(
            {"resources": {"deviceClassMappings": []}}, "s.yaml", "config", configuration.QUOTA_RESOURCES
        )
    assert "s.yaml config.resources.deviceClassMappings: not read here" in str(refused.value)


def test_the_controller_reads_its_file_once(tmp_path: Path) -> None:
    """The job side and the engine come from one read of --config (the file may be gone)."""
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + "fairSharing: {enable: true}\nintegrations: {frameworks: [batch/job]}\n")
    cfg = configuration.load(path)
    path.unlink()
    config = controller_command.engine_config(path, False, True, cfg)
    assert config.fair_sharing.enable and config.async_evictions
    assert controller_command.jobs_of(cfg).frameworks == ("batch/job",)
