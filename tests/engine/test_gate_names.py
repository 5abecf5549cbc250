"""Feature gates are read by name: a name no Kueue release has is refused, not read as off."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pykueue.api import defaults
from pykueue.engine.config import DEFAULT_GATES, KNOWN_GATES, EngineConfig

SRC = Path(__file__).resolve().parents[2] / "src" / "pykueue"


def test_a_misspelt_gate_raises_instead_of_reading_as_off() -> None:
    with pytest.raises(KeyError, match="TopologyAwareSchedulng"):
        EngineConfig().gate("TopologyAwareSchedulng")
    with pytest.raises(KeyError, match="PartialAdmision"):
        defaults.gate_enabled({}, "PartialAdmision")


def test_every_default_is_a_known_gate() -> None:
    assert set(DEFAULT_GATES) <= KNOWN_GATES
    assert set(defaults.DEFAULT_FEATURE_GATES) <= KNOWN_GATES


def test_every_gate_the_code_reads_is_a_known_gate() -> None:
    """The names in the source, so that a gate read only on a rare path is checked too."""
    read = set()
    for path in SRC.rglob("*.py"):
        read.update(re.findall(r"gate\(\s*\"([A-Za-z]+)\"", path.read_text()))
        read.update(re.findall(r"gate_enabled\([^,]+,\s*\"([A-Za-z]+)\"", path.read_text()))
    assert read, "no gate read found: the pattern no longer matches the code"
    assert read <= KNOWN_GATES, sorted(read - KNOWN_GATES)
