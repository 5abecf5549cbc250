"""`pykueue policy history | show | rollback`: the recorded changes of the queue setup.

    history [--kind K] [--name N] [--limit L] [--format table|json]    who changed what, when
    show REV [--format text|json]                                       one change, as a diff
    rollback REV [--dry-run | --apply] [--format text|json]             back to REV (dry run by default)

Against a standalone server (``--server``/``--socket``, as `get`) or a cluster
(``--kubeconfig``, reading the ConfigMaps the controller writes: cli/policy_kube.py).

Like `get` (cli/queries.py), these run on argparse and the plain HTTP client, without
typer: `policy` is registered with typer only so that help and completion list it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pykueue.cli.client import call, client, fail
from pykueue.cli.queries import CONNECTION, table

if TYPE_CHECKING:
    import typer

T = TypeVar("T")
HELP = "Policy history and rollback: who changed which queue, flavor or priority class, and undo it."


def on_cluster(args: argparse.Namespace, work: Callable[[Any], T]) -> T:
    """Run ``work(policy_kube)`` against the cluster of ``--kubeconfig``; errors end the command."""
    from pykueue.cli import policy_kube  # the Kubernetes client stack, only when asked for
    from pykueue.errors import InputError, PykueueError, ValidationError

    try:
        return work(policy_kube)
    except ValidationError as exc:
        fail("a revision's object is refused by today's API", [str(p) for p in exc.problems])
    except (PykueueError, InputError) as exc:
        fail(str(exc))


def history(args: argparse.Namespace) -> None:
    if args.kubeconfig:
        rows = on_cluster(
            args,
            lambda kube: kube.history(
                args.kubeconfig, args.context, args.controller_namespace, args.kind, args.name, args.limit
            ),
        )
    else:
        api = client(args.server, args.token, args.socket)
        rows = call(
            lambda: api.get("/api/v1/policy/history", kind=args.kind, name=args.name, limit=args.limit)
        )
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return
    table(
        [
            [
                str(r["rev"]),
                r["at"],
                r["who"],
                r["operation"],
                r["kind"],
                f"{r['namespace']}/{r['name']}" if r["namespace"] else r["name"],
                str(r["changes"]),
            ]
            for r in rows
        ],
        ["REV", "TIME", "WHO", "OPERATION", "KIND", "NAME", "CHANGES"],
    )


def show(args: argparse.Namespace) -> None:
    if args.kubeconfig:
        data = on_cluster(
            args, lambda kube: kube.show(args.kubeconfig, args.context, args.controller_namespace, args.rev)
        )
    else:
        api = client(args.server, args.token, args.socket)
        data = call(lambda: api.get(f"/api/v1/policy/revisions/{args.rev}"))
    if args.format == "json":
        print(json.dumps(data, indent=2))
        return
    name = f"{data['namespace']}/{data['name']}" if data["namespace"] else data["name"]
    print(f"Revision:  {data['rev']}")
    print(f"Time:      {data['at']}")
    print(f"Who:       {data['who']}")
    print(f"Change:    {data['operation']} {data['kind']} {name}")
    print("Diff:")
    for line in data["diff"]:
        print(f"  {line}")


def rollback(args: argparse.Namespace) -> None:
    if args.kubeconfig:
        data = on_cluster(
            args,
            lambda kube: kube.rollback(
                args.kubeconfig, args.context, args.controller_namespace, args.rev, args.apply
            ),
        )
    else:
        api = client(args.server, args.token, args.socket)
        data = call(lambda: api.post("/api/v1/policy/rollback", {"revision": args.rev, "apply": args.apply}))
    if args.format == "json":
        print(json.dumps(data, indent=2))
        return
    if not data["objects"]:
        print(f"Nothing to roll back: every policy object is as it was at revision {args.rev}.")
        return
    print(f"Back to revision {args.rev}:")
    for obj in data["objects"]:
        name = f"{obj['namespace']}/{obj['name']}" if obj["namespace"] else obj["name"]
        print(f"  {obj['action']} {obj['kind']} {name}")
        for line in obj["diff"]:
            print(f"      {line}")
    differences = data["differences"]
    if differences:
        print("Workloads that would fare differently (played forward on the live state):")
        table(
            [[d["workload"], d["queue"], d["now"], d["afterRollback"]] for d in differences],
            ["WORKLOAD", "QUEUE", "NOW", "AFTER ROLLBACK"],
        )
    else:
        print("No workload would be admitted or preempted differently.")
    if data["applied"]:
        for result in data["results"]:
            print(f"{result['kind']}/{result['name']} {result['action']}")
    else:
        print(f"Dry run: nothing changed. Apply with: pykueue policy rollback {args.rev} --apply")


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(prog="pykueue policy", description=HELP)
    commands = out.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("history", help="Recorded changes, oldest first.")
    listing.add_argument("--kind", help="Only this kind (ClusterQueue, LocalQueue, Cohort, ...).")
    listing.add_argument("--name", help="Only objects of this name.")
    listing.add_argument("--limit", type=int, help="Only the last N changes.")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.set_defaults(run=history)
    one = commands.add_parser("show", help="One change: who, when and the diff.")
    one.add_argument("rev", type=int, help="The revision number (see history).")
    one.add_argument("--format", choices=("text", "json"), default="text")
    one.set_defaults(run=show)
    back = commands.add_parser(
        "rollback", help="Put every policy object changed after REV back as it was at REV."
    )
    back.add_argument("rev", type=int, help="The revision to go back to (0: before any recorded change).")
    mode = back.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", dest="apply", action="store_false", help="Only show (the default).")
    mode.add_argument("--apply", dest="apply", action="store_true", help="Apply it, all or nothing.")
    back.add_argument("--format", choices=("text", "json"), default="text")
    back.set_defaults(run=rollback, apply=False)
    for sub in (listing, one, back):
        for param in CONNECTION:
            sub.add_argument(*param.flags, dest=param.name, default=param.default, help=param.help)
        sub.add_argument(
            "--kubeconfig", type=Path, help="A cluster's history instead of a standalone server's."
        )
        sub.add_argument("--context", help="kubeconfig context (default: current).")
        sub.add_argument(
            "--controller-namespace",
            default="kueue-system",
            help="Where the controller keeps the history (its lease namespace; default kueue-system).",
        )
    return out


def main(argv: list[str]) -> int:
    """Run ``argv`` (``policy`` first); usage errors exit 2."""
    args = parser().parse_args(argv[1:])
    args.run(args)
    return 0


def register(app: typer.Typer) -> None:
    """List `policy` in typer's help; what follows it is argparse's."""
    import typer

    def policy(ctx: Any) -> None:
        raise SystemExit(main(["policy", *ctx.args]))

    # Spelled out: this module's annotations are strings, and typer is not imported at its top.
    policy.__annotations__ = {"ctx": typer.Context, "return": None}
    app.command(
        "policy",
        help=HELP,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        add_help_option=False,
    )(policy)
