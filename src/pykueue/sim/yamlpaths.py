"""YAML read with a line number for every field path, for messages like ``file:12 cohorts[0].count``."""

from __future__ import annotations

from typing import Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """The single document of ``text`` as Python values, and the 1-based line of each path.

    Raises ValueError with a located message when the text is not YAML.
    """
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"{source}{line}: not valid YAML ({problem})") from exc
    lines: dict[str, int] = {}
    if node is None:
        return None, lines
    return _convert(node, "", lines, yaml.SafeLoader("")), lines


def _convert(node: yaml.Node, path: str, lines: dict[str, int], scalars: yaml.SafeLoader) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            result[key] = _convert(value_node, child, lines, scalars)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, f"{path}[{index}]", lines, scalars) for index, item in enumerate(node.value)]
    return scalars.construct_object(node)
