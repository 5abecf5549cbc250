"""Reading a scenario file into checked, typed steps, or a clear error naming the place."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from pykueue.api import configuration as api_configuration
from pykueue.api import manifests
from pykueue.engine import configuration, intake
from pykueue.engine.config import EngineConfig
from pykueue.errors import PykueueError, ScenarioError, ValidationError
from pykueue.scenario import shapes

TOP_KEYS = {"format", "name", "description", "now", "config", "objects", "steps", "expect", "divergence"}
DIVERGENCE_KEYS = {"reason", "upstream", "upstreamVersion", "timing"}
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
# The Configuration sections a scenario's ``config`` takes: the engine's (FORMAT.md).
CONFIG_KEYS = api_configuration.ENGINE_SECTIONS | api_configuration.QUOTA_RESOURCES
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
    if "divergence" in doc:
        _check_divergence(doc["divergence"], f"{source} divergence")
    return Scenario(source, name, now, config, objects, steps, expect)


def _check_divergence(value: Any, where: str) -> None:
    """FORMAT.md's `divergence`: a record of what upstream did; only its shape is checked (`scenario
    check` compares `expect`, pykueue's result)."""
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: must be a mapping")
    unknown = sorted(set(value) - DIVERGENCE_KEYS)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s): {', '.join(map(str, unknown))}")
    if not isinstance(value.get("reason"), str) or not value["reason"].strip():
        raise ScenarioError(f"{where} reason: required, why pykueue decides differently")
    if "upstream" in value:
        _check_expect(value["upstream"], f"{where} upstream")
    if "upstreamVersion" in value and not isinstance(value["upstreamVersion"], str):
        raise ScenarioError(f"{where} upstreamVersion: must be a string such as v0.19.2")
    if "timing" in value and not isinstance(value["timing"], bool):
        raise ScenarioError(f"{where} timing: must be true or false")


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
    """``config``: Configuration sections, read as every configuration is; pykueue's own
    options stay off unless named (a scenario describes upstream's cycle)."""
    try:
        cfg = api_configuration.parse_sections(raw, source, "config", CONFIG_KEYS)
    except ValidationError as exc:
        raise ScenarioError(str(exc)) from None
    return configuration.engine_config(cfg, nominal_first_default=False)


def _only(raw: dict[Any, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s): {', '.join(unknown)}")


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
        doc = shapes.topology_domains_as_slices(doc)
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
