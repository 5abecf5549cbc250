"""The controller's Kueue Configuration file: what reaches the engine."""

from __future__ import annotations

import pytest

from pykueue.errors import InputError
from pykueue.reconcilers import kueue_configuration


def _doc(resources: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "resources": resources}


def test_resource_transformations_reach_the_engine_and_device_mappings_stay_with_jobs() -> None:
    loaded = kueue_configuration.parse(
        _doc(
            {
                "excludeResourcePrefixes": ["example.com/"],
                "transformations": [
                    {"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace", "outputs": {"gpu-slices": "1"}}
                ],
                "deviceClassMappings": [{"name": "gpus", "deviceClassNames": ["gpu.example.com"]}],
            }
        ),
        "config.yaml",
    )
    assert loaded.engine.resources is not None
    assert [t.input for t in loaded.engine.resources.transformations] == ["nvidia.com/mig-1g.5gb"]
    assert loaded.engine.resources.exclude_prefixes == ("example.com/",)


def test_a_bad_transformation_is_refused_with_its_field() -> None:
    with pytest.raises(InputError, match=r"resources.transformations\[0\].strategy"):
        kueue_configuration.parse(
            _doc({"transformations": [{"input": "cpu", "strategy": "Sideways", "outputs": {}}]}),
            "config.yaml",
        )
