"""No two files of pykueue import each other, directly or around a longer circle.

import-linter's ``acyclic_siblings`` contract (pyproject.toml, ``make layers``) says the same per
package; this test says it for the whole file graph and runs with the unit tests, so a circle
brought back by an import inside a function fails here too (grimp reads those as well).
"""

from __future__ import annotations

import grimp

Graph = dict[str, set[str]]


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan, iterative: the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
    return found


def pykueue_graph() -> Graph:
    graph = grimp.build_graph("pykueue", include_external_packages=False, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_circles_are_found() -> None:
    # The finder itself: a circle of three, a self-contained pair, and a chain that is no circle.
    graph: Graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set(), "x": {"y"}, "y": {"x"}}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["x", "y"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_files() -> None:
    graph = pykueue_graph()
    assert len(graph) > 100  # the package was found, not an empty graph
    assert circles(graph) == [], "files importing each other, directly or around a circle"
