"""`State` is changed only through its methods: no module of pykueue writes its fields.

`State`'s fields keep each other consistent (a workload in `admitted` is counted in
`cq_usage` and the cohort tree; `touched` is what the owner writes back). A caller
that assigns a field or changes a field's dict, set or list by hand can break that
without any test noticing, so every such change has a named method, and this scan
keeps it so.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pykueue
from pykueue.engine.events import Event
from pykueue.engine.state import State

SRC = Path(pykueue.__file__).parent
# The methods of dict, set and list that change them.
CHANGING = {
    "add",
    "append",
    "clear",
    "difference_update",
    "discard",
    "extend",
    "insert",
    "intersection_update",
    "pop",
    "popitem",
    "remove",
    "setdefault",
    "symmetric_difference_update",
    "update",
}
FIELDS = {f.name for f in dataclasses.fields(State)}


def _state_field(node: ast.expr, source: str) -> ast.Attribute | None:
    """``node`` (under any subscripts) as a field of something named like a state."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if not isinstance(node, ast.Attribute) or node.attr not in FIELDS:
        return None
    owner = ast.get_source_segment(source, node.value) or ""
    return node if "state" in owner.lower() else None


def changes_by_hand(source: str, name: str) -> list[str]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CHANGING
            # state.touched.add(...), not state.queues[name].pop(): that is the queue's own method.
            and isinstance(node.func.value, ast.Attribute)
        ):
            targets = [node.func.value]
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                field = _state_field(one, source)
                if field is not None:
                    found.append((node.lineno, f"{name}:{node.lineno}: {field.attr}"))
    return [text for _, text in sorted(found)]


def test_the_scan_sees_a_change_by_hand() -> None:
    code = (
        "def f(state, self):\n"
        "    state.now = 1\n"
        "    self.state.touched.add('k')\n"
        "    state.limit_ranges.setdefault('ns', {})['x'] = []\n"
        "    del state.finished['k']\n"
        "    state.queues['cq'].pop()\n"  # the queue's own method: allowed
        "    state.record(None)\n"  # a State method: allowed
    )
    found = changes_by_hand(code, "sample.py")
    assert [line.split(": ")[1] for line in found] == ["now", "touched", "limit_ranges", "finished"]


def test_no_module_changes_state_fields_by_hand() -> None:
    found = [
        hit
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "engine" / "state.py"
        for hit in changes_by_hand(path.read_text(), str(path.relative_to(SRC)))
    ]
    assert found == [], "use (or add) a State method instead"


def test_the_bookkeeping_methods() -> None:
    state = State()
    state.set_clock(5)
    assert state.now == 5
    assert state.begin_cycle() == 1 and state.cycle == 1
    state.record(Event(1, "ns/a", "Pending", "m"))
    state.touch("ns/a")
    assert [e.workload for e in state.events] == ["ns/a"] and state.touched == {"ns/a"}
    state.clear_events()
    state.clear_touched()
    assert state.events == [] and state.touched == set()
    state.apply_priority_class("PriorityClass", "high", 10)
    state.apply_limit_range("ns", "lr", [])
    assert state.priority_values == {("PriorityClass", "high"): 10} and state.limit_ranges == {
        "ns": {"lr": []}
    }
    state.delete_priority_class("PriorityClass", "high")
    state.delete_limit_range("ns", "lr")
    state.delete_limit_range("other", "lr")  # unknown: nothing to do
    assert state.priority_values == {} and state.limit_ranges == {"ns": {}}
    state.mark_aged("cq", True)
    assert state.aged_queues == {"cq"}
    state.mark_aged("cq", False)
    assert state.aged_queues == set()


def test_state_stays_readable() -> None:
    # Issue 43: no source file over 800 lines; State grew to 927 before its parts moved out.
    assert len((SRC / "engine" / "state.py").read_text().splitlines()) < 800
