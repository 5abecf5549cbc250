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

import typer

from pykueue.api import manifests
from pykueue.errors import InputError, ValidationError


def validate(
    filenames: list[Path] = typer.Option(
        ...,
        "-f",
        "--filename",
        help="A manifest file or a directory of them (*.yaml, *.yml, *.json); repeat for more.",
    ),
) -> None:
    """Validate Kueue manifests (v1beta2, or v1beta1 converted) as the API server would."""
    files = manifests.manifest_files(filenames)
    if not files:
        typer.echo("no manifest files (*.yaml, *.yml, *.json) found in: " + ", ".join(map(str, filenames)))
        raise typer.Exit(1)
    try:
        objects = manifests.load_paths(files)
    except ValidationError as err:
        for problem in err.problems:
            typer.echo(str(problem))
        count = len(err.problems)
        typer.echo(f"{count} problem{'s' if count != 1 else ''} found", err=True)
        raise typer.Exit(1) from None
    except InputError as err:
        typer.echo(str(err))
        raise typer.Exit(1) from None
    kinds = Counter(obj.kind for obj in objects)
    detail = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    plural = "s" if len(files) != 1 else ""
    typer.echo(
        f"OK: {len(objects)} objects in {len(files)} file{plural}" + (f" ({detail})" if detail else "")
    )


def register(app: typer.Typer) -> None:
    """Add `validate` to the app."""
    app.command("validate")(validate)
