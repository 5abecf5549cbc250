"""`pykueue scenario run|check FILE...`: run scenario files (shared/scenarios/FORMAT.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from pykueue.errors import InputError
from pykueue.scenario import loader, report, runner

scenario_app = typer.Typer(help="Run scenario files: cluster state, steps and expected decisions.")


def register(app: typer.Typer) -> None:
    app.add_typer(scenario_app, name="scenario")


def _expand(files: list[Path]) -> list[Path]:
    result: list[Path] = []
    for path in files:
        if path.is_dir():
            result.extend(sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")]))
        else:
            result.append(path)
    return result


def _run_all(files: list[Path]) -> list[tuple[Path, loader.Scenario, dict[str, Any]]]:
    """Load and run every file; any invalid file stops everything before output is printed."""
    results = []
    errors = []
    for path in _expand(files):
        try:
            scenario = loader.load(path)
            results.append((path, scenario, runner.run(scenario)))
        except InputError as exc:
            errors.append(str(exc))
    if errors:
        for message in errors:
            typer.echo(f"error: {message}", err=True)
        raise typer.Exit(2)
    return results


@scenario_app.command("run")
def run_command(
    files: list[Path] = typer.Argument(..., help="Scenario files or folders of them."),
    as_json: bool = typer.Option(False, "--json", help="Print the result document(s) as JSON."),
) -> None:
    """Run scenarios and print what the engine decided."""
    results = _run_all(files)
    documents = [document for _, _, document in results]
    if as_json:
        payload: Any = documents[0] if len(documents) == 1 else documents
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=False) + "\n")
        return
    for path, _, document in results:
        typer.echo(f"{path}: {document['name']}")
        for key, value in document["admitted"].items():
            typer.echo(f"  admitted  {key} in {value['clusterQueue']}")
        for cq, keys in document["pending"].items():
            typer.echo(f"  pending   {', '.join(keys)} in {cq}")
        for cq, keys in document["inadmissible"].items():
            typer.echo(f"  parked    {', '.join(keys)} in {cq}")
        for key in document["preempted"]:
            typer.echo(f"  preempted {key}")


@scenario_app.command("check")
def check_command(
    files: list[Path] = typer.Argument(..., help="Scenario files or folders of them."),
) -> None:
    """Run scenarios and compare with their `expect` blocks; exit 1 on any mismatch."""
    failed = 0
    results = _run_all(files)
    for path, scenario, document in results:
        problems = check(scenario, document)
        if problems:
            failed += 1
            typer.echo(f"FAIL {path}: {scenario.name}")
            for problem in problems:
                typer.echo(f"  {problem}")
        else:
            typer.echo(f"ok   {path}")
    typer.echo(f"{len(results) - failed} passed, {failed} failed")
    if failed:
        raise typer.Exit(1)


def check(scenario: loader.Scenario, document: dict[str, Any]) -> list[str]:
    """All mismatches between a scenario's expectations and its result."""
    problems: list[str] = []
    checkpoints = document.get("checkpoints", [])
    expect_steps = [step for step in scenario.steps if step.kind == "expect"]
    for step, actual in zip(expect_steps, checkpoints, strict=True):
        problems.extend(report.compare(step.value, actual, step.path))
    if scenario.expect is not None:
        problems.extend(report.compare(scenario.expect, document, "expect"))
    return problems
