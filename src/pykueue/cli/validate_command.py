"""`pykueue validate`: check manifests against the Kueue API without a cluster.

Every problem of every file is printed on its own line, in the form an operator can
jump to (``queues.yaml#3 ClusterQueue/research spec.resourceGroups[0].flavors[1].name:
...``), and the command exits 1; when all is well it prints a one-line summary and
exits 0. Bad input is never shown as a traceback: loading raises only InputErrors,
which are caught here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import typer

from pykueue.api import manifests
from pykueue.errors import FieldProblem, InputError, ParseError, ValidationError
from pykueue.reconcilers import integrations


def _check(doc: Any, where: str, prefix: str) -> tuple[str | None, list[FieldProblem]]:
    """(the kind read, or None when passed over) and the problems of one document."""
    ref = manifests.object_ref(doc) if isinstance(doc, dict) else ""
    problems: list[FieldProblem] = []
    kind: str | None = str(doc.get("kind")) if isinstance(doc, dict) else "?"
    integration = (
        integrations.by_kind(str(doc.get("apiVersion")), str(doc.get("kind")))
        if isinstance(doc, dict)
        else None
    )
    if manifests.knows(doc):
        try:
            manifests.parse_object(doc, where, manifests.SUBMITTED)
        except ValidationError as err:
            problems.extend(err.problems)
    elif integration is None:
        kind = None
    if integration is not None and not problems:
        problems.extend(
            FieldProblem(p.path, p.message, ref, where) for p in integrations.check_job(doc, integration)
        )
    return kind, [
        FieldProblem(f"{prefix}{p.path}" if prefix else p.path, p.message, p.obj, p.source) for p in problems
    ]


def validate(
    filenames: list[Path] = typer.Option(
        ...,
        "-f",
        "--filename",
        help="A manifest file or a directory of them (*.yaml, *.yml, *.json); repeat for more.",
    ),
) -> None:
    """Validate Kueue manifests and the jobs they queue, as the API server and Kueue would.

    Kueue kinds (v1beta2, or v1beta1 converted) are checked as the API server would;
    jobs of every kind pykueue integrates (Job, JobSet, Pod, ...) by the Workload Kueue
    would make of them. Documents of other kinds (ConfigMap, RBAC, ...) are passed over
    with a notice.
    """
    files = manifests.manifest_files(filenames)
    if not files:
        typer.echo("no manifest files (*.yaml, *.yml, *.json) found in: " + ", ".join(map(str, filenames)))
        raise typer.Exit(1)
    kinds: Counter[str] = Counter()
    problems: list[FieldProblem] = []
    skipped = 0
    for path in files:
        try:
            docs = manifests.documents(manifests.read_text(path), str(path))
        except ParseError as err:
            problems.append(FieldProblem("", str(err).removeprefix(f"{path}:").strip(), source=str(path)))
            continue
        except InputError as err:
            typer.echo(str(err))
            raise typer.Exit(1) from None
        for where, prefix, doc in docs:
            if isinstance(doc, dict) and "apiVersion" not in doc and "kind" not in doc:
                skipped += 1  # a file beside the manifests (a dashboard, a kind config): not one
                typer.echo(f"{where}: passed over: not a Kubernetes manifest (no apiVersion, no kind)")
                continue
            kind, found = _check(doc, where, prefix)
            if kind is None:
                skipped += 1
                typer.echo(
                    f"{where} {manifests.object_ref(doc)}: passed over: pykueue does not manage "
                    f"{doc.get('apiVersion')} {doc.get('kind')}"
                )
                continue
            problems.extend(found)
            if not found:
                kinds[kind] += 1
    if problems:
        for problem in problems:
            typer.echo(str(problem))
        count = len(problems)
        typer.echo(f"{count} problem{'s' if count != 1 else ''} found", err=True)
        raise typer.Exit(1)
    detail = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    plural = "s" if len(files) != 1 else ""
    total = sum(kinds.values())
    passed = f"; {skipped} passed over" if skipped else ""
    typer.echo(
        f"OK: {total} objects in {len(files)} file{plural}" + (f" ({detail})" if detail else "") + passed
    )


def register(app: typer.Typer) -> None:
    """Add `validate` to the app."""
    app.command("validate")(validate)
