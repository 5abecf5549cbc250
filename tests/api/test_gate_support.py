"""Feature gates of v0.19.2: each implemented, refused at one value by name, or not applicable,
and the table in docs/semantics.md says the same as `api/gate_support.py`."""

from __future__ import annotations

import pytest

from audit_table import code, rows
from pykueue.api import configuration
from pykueue.api.feature_gates import KNOWN_GATES
from pykueue.api.gate_support import BOTH, NOT_APPLICABLE, ONLY, SUPPORT
from pykueue.errors import ValidationError


def _table() -> dict[str, list[str]]:
    return {code(row[0]): row for row in rows("Feature gates")}


def test_every_known_gate_has_one_row_and_one_support_entry() -> None:
    table = _table()
    assert sorted(KNOWN_GATES - set(table)) == [], "gates missing from docs/semantics.md"
    assert sorted(set(table) - KNOWN_GATES) == [], "rows for gates pykueue does not know"
    assert set(SUPPORT) == set(KNOWN_GATES)


def test_the_table_says_what_the_code_does_and_nothing_is_ignored() -> None:
    for name, row in _table().items():
        state = row[2]
        assert "ignored" not in " ".join(row).lower(), name
        support = SUPPORT[name]
        if support.kind == BOTH:
            assert state == "implemented", name
        elif support.kind == ONLY:
            value, other = str(support.value).lower(), str(not support.value).lower()
            assert state == f"only {value} ({other} refused)", name
        else:
            assert support.kind == NOT_APPLICABLE and state == "not applicable", name
        assert row[3], f"{name}: no reason or place given"


def _config(name: str, value: bool) -> object:
    return configuration.parse_sections({"featureGates": {name: value}}, "config.yaml")


@pytest.mark.parametrize("name", sorted(n for n, s in SUPPORT.items() if s.kind == ONLY))
def test_a_gate_set_to_the_value_pykueue_lacks_is_refused_by_name(name: str) -> None:
    value = SUPPORT[name].value
    assert value is not None
    _config(name, value)  # the value pykueue implements is accepted
    with pytest.raises(
        ValidationError, match=rf"featureGates.*{name}: {str(not value).lower()} is not supported"
    ):
        _config(name, not value)


@pytest.mark.parametrize("name", sorted(n for n, s in SUPPORT.items() if s.kind != ONLY))
def test_implemented_and_inapplicable_gates_take_both_values(name: str) -> None:
    _config(name, True)
    _config(name, False)


def test_concurrent_admission_on_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError) as err:
        _config("ConcurrentAdmission", True)
    assert "featureGates" in str(err.value)
    assert (
        "ConcurrentAdmission: true is not supported by pykueue "
        "(only false: concurrent admission is not implemented)"
    ) in str(err.value)
