"""Reading the audit tables of docs/semantics.md ("API fields and feature gates of v0.19.2")."""

from __future__ import annotations

from pathlib import Path

SEMANTICS = Path(__file__).resolve().parents[1] / "docs" / "semantics.md"
SECTION = "## API fields and feature gates of v0.19.2"


def rows(subsection: str) -> list[list[str]]:
    """The body rows of the table under ``### <subsection>``, each a list of cell texts."""
    text = SEMANTICS.read_text()
    assert SECTION in text, f"docs/semantics.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    assert f"### {subsection}" in section, f"no '### {subsection}' under {SECTION!r}"
    part = section.split(f"### {subsection}", 1)[1].split("\n### ", 1)[0]
    table = [line for line in part.splitlines() if line.startswith("|")]
    body = table[2:]  # the header and its separator
    assert body, f"the {subsection} table is empty"
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in body]


def code(cell: str) -> str:
    """A cell's text without its backquotes."""
    return cell.replace("`", "")
