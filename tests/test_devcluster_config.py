"""`pykueue dev-cluster --config`: the controller it runs reads upstream's Configuration file
as `pykueue controller --config` does; a bad file stops it before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pykueue.cli import devcluster_command
from pykueue.cli.main import app

CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job, jobset.x-k8s.io/jobset]
featureGates:
  PartialAdmission: false
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames: [gpu.example.com]
  - name: gpu.memory
    deviceClassNames: [shared.example.com]
    sources:
    - capacity: {name: shared.example.com/memory, driver: shared.example.com}
"""


def test_the_configuration_reaches_the_controller(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    setup = devcluster_command.configured(path)
    assert setup.settings.device_classes == {
        "gpu.example.com": "example.com/gpu",
        "shared.example.com": "gpu.memory",
    }
    assert setup.settings.device_class_sources["shared.example.com"].startswith(
        "resources.deviceClassMappings[1].sources[0].capacity"
    )
    assert setup.frameworks == ("batch/job", "jobset.x-k8s.io/jobset")
    assert setup.engine is not None and setup.engine.feature_gates["PartialAdmission"] is False
    # Kubernetes mode's own default stays under the file's gates, as `pykueue controller` runs.
    assert setup.engine.feature_gates["UnadmittedWorkloadsExplicitStatus"] is True


def test_without_a_file_dev_cluster_keeps_its_defaults() -> None:
    setup = devcluster_command.configured(None)
    assert setup.engine is None and setup.frameworks == () and setup.settings.device_classes == {}


def test_a_bad_file_stops_dev_cluster_before_it_starts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("deviceClassNames: [gpu.example.com]", "deviceClassNames: []"))
    with pytest.raises(typer.Exit) as exc:
        devcluster_command.configured(bad)
    assert exc.value.exit_code == 2
    # As a user runs it: the message names the file and the field; no control plane was started.
    result = CliRunner().invoke(app, ["dev-cluster", "--config", str(bad), "--dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "deviceClassMappings" in result.output and str(bad) in result.output
    assert not (tmp_path / "state").exists()
