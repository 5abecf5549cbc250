"""The commands that talk to a running `pykueue up` over its HTTP API.

    submit      a command as a batch/v1 Job (resources, queue, GPUs), then its first decision
    apply -f    manifests (files, folders, or - for stdin), all or nothing
    delete      KIND NAME, or every object of -f files
    get         clusterqueues | localqueues | workloads | jobs   (-o json for scripts)
    describe    workload NAME: its state, why it waits, its position, its pods
    logs        NAME: the output of a job's pods
    stop/resume workload NAME | clusterqueue NAME
    token       create an identity (admin or tenant) and print its token

Every refusal is printed as the server wrote it (``file#doc Kind/name path:
message``) and exits with status 1; nothing here prints a traceback for bad
input or an unreachable server.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import typer

from pykueue.cli import client as apiclient
from pykueue.cli import queries
from pykueue.cli.client import ClientError
from pykueue.errors import ParseError

SERVER = typer.Option(
    None, "--server", help="URL of the pykueue API (default: PYKUEUE_SERVER or the client config)."
)
TOKEN = typer.Option(None, "--token", help="API token (default: PYKUEUE_TOKEN or the client config).")
SOCKET = typer.Option(
    None, "--socket", help="The server's Unix socket; no token needed (default: PYKUEUE_SOCKET, or found)."
)
NAMESPACE = typer.Option("default", "--namespace", "-n", help="Namespace of the object.")


def register(app: typer.Typer) -> None:
    app.command("submit", context_settings={"allow_interspersed_args": False})(submit)
    app.command("apply")(apply)
    app.command("delete")(delete)
    app.command("stop")(stop)
    app.command("resume")(resume)
    app.command("token")(token)


def _print_results(results: list[dict[str, str]]) -> None:
    for item in results:
        where = f"{item['namespace']}/" if item["namespace"] else ""
        typer.echo(f"{item['kind']} {where}{item['name']} {item['action']}")


# ------------------------------------------------------------------- submit


def job_manifest(
    command: list[str],
    queue: str,
    namespace: str,
    name: str,
    cpu: str,
    memory: str | None,
    gpus: int,
    priority_class: str | None,
    parallelism: int,
    completions: int | None,
    retries: int,
    grace: int,
    workdir: str,
    variables: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "backoffLimit": retries,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": grace,
                "containers": [
                    {
                        "name": "main",
                        "command": command,
                        "workingDir": workdir,
                        "resources": {"requests": requests},
                        **(
                            {"env": [{"name": k, "value": v} for k, v in variables.items()]}
                            if variables
                            else {}
                        ),
                    }
                ],
            }
        },
    }
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def submit(
    command: list[str] = typer.Argument(..., help="The command to run, after --."),
    queue: str = typer.Option(..., "--queue", "-q", help="LocalQueue to submit to."),
    namespace: str = NAMESPACE,
    name: str = typer.Option(None, "--name", help="Job name (default: the command's name and a suffix)."),
    cpu: str = typer.Option("1", "--cpu", help="CPU per pod (e.g. 4, 500m)."),
    memory: str = typer.Option(None, "--memory", help="Memory per pod (e.g. 16Gi)."),
    gpus: int = typer.Option(
        0, "--gpus", min=0, help="GPUs per pod (nvidia.com/gpu), pinned with CUDA_VISIBLE_DEVICES."
    ),
    priority_class: str = typer.Option(None, "--priority-class", help="WorkloadPriorityClass name."),
    parallelism: int = typer.Option(1, "--parallelism", min=1, help="Pods run at once."),
    completions: int = typer.Option(
        None, "--completions", min=1, help="Pods that must succeed (default: parallelism)."
    ),
    retries: int = typer.Option(
        0, "--retries", min=0, help="Failed pods retried before the job fails (backoffLimit)."
    ),
    grace: int = typer.Option(
        30, "--grace", min=0, help="Seconds between SIGTERM and SIGKILL on preemption."
    ),
    env: list[str] = typer.Option(
        None, "--env", "-e", help="KEY=VALUE for the job's environment (repeatable)."
    ),
    wait: float = typer.Option(
        3.0, "--wait", help="Seconds to wait for the first decision (0: do not wait)."
    ),
    server: str = SERVER,
    token: str = TOKEN,
    socket: str = SOCKET,
) -> None:
    """Submit a command as a Job: `pykueue submit --queue main --gpus 1 -- python train.py`.

    The job runs in the current folder with a clean environment: your PATH (and VIRTUAL_ENV,
    CONDA_PREFIX when set) is copied into it so the command resolves as in your shell; add
    more with --env KEY=VALUE.
    """
    variables = _environment(env or [])
    api = apiclient.client(server, token, socket)
    job_name = (
        name
        or f"{Path(command[0]).name.lower().replace('_', '-').replace('.', '-')[:40]}-{secrets.token_hex(3)}"
    )
    manifest = job_manifest(
        command,
        queue,
        namespace,
        job_name,
        cpu,
        memory,
        gpus,
        priority_class,
        parallelism,
        completions,
        retries,
        grace,
        os.getcwd(),
        variables,
    )
    import yaml  # only here and in delete -f: `get` and `describe` do not pay for it

    text = yaml.safe_dump(manifest, sort_keys=False)
    result = apiclient.call(lambda: api.post("/api/v1/apply", {"files": [{"name": "submit", "text": text}]}))
    _print_results(result["results"])
    if wait <= 0:
        return
    deadline = time.monotonic() + wait
    described: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            described = api.get(f"/api/v1/describe/workload/{namespace}/{job_name}")
        except ClientError:
            described = {}
        explanation = described.get("explanation") or {}
        decided = explanation.get("state") in ("Admitted", "QuotaReserved", "Finished")
        if decided or explanation.get("engineMessage"):
            break
        time.sleep(0.1)
    explanation = described.get("explanation") or {}
    if explanation.get("state") == "Admitted":
        typer.echo(f"admitted to ClusterQueue {explanation.get('clusterQueue')}")
    elif explanation.get("state") == "QuotaReserved":
        typer.echo(f"quota reserved in ClusterQueue {explanation.get('clusterQueue')}; not started yet:")
        for reason in explanation.get("reasons", []):
            typer.echo(f"  {reason['category']}: {reason['message']}")
    elif explanation.get("state") == "Pending":
        typer.echo(queries.position_text(explanation))
        for reason in explanation.get("reasons", []):
            typer.echo(f"  {reason['category']}: {reason['message']}")
            if reason["message"].startswith("can never fit"):
                typer.echo(
                    "warning: this job can never be admitted as requested; delete it or ask for less",
                    err=True,
                )
    elif explanation.get("state"):
        typer.echo(f"state: {explanation['state']}")


COPIED_VARIABLES = ("PATH", "VIRTUAL_ENV", "CONDA_PREFIX")


def _environment(pairs: list[str]) -> dict[str, str]:
    """The caller's PATH (and virtualenv / conda prefix), then every --env KEY=VALUE."""
    variables = {k: os.environ[k] for k in COPIED_VARIABLES if os.environ.get(k)}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            typer.echo(f"error: --env {pair!r}: write KEY=VALUE", err=True)
            raise typer.Exit(1)
        variables[key] = value
    return variables


# -------------------------------------------------------------- apply/delete


def _read_files(files: list[Path]) -> list[dict[str, str]]:
    out = []
    for path in files:
        if str(path) == "-":
            try:
                out.append({"name": "stdin", "text": sys.stdin.buffer.read().decode("utf-8")})
            except UnicodeDecodeError as exc:
                typer.echo(f"error: stdin: not UTF-8 text (byte {exc.start})", err=True)
                raise typer.Exit(1) from None
            continue
        from pykueue.api import manifests  # the models take a while to import: only apply -f needs them

        try:
            paths = manifests.manifest_files([path])
        except Exception as exc:
            typer.echo(f"error: {path}: {exc}", err=True)
            raise typer.Exit(1) from None
        for item in paths:
            try:
                out.append({"name": str(item), "text": manifests.read_text(item)})
            except ParseError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(1) from None
    return out


def apply(
    files: list[Path] = typer.Option(
        ..., "--filename", "-f", help="Files or folders of manifests (- for stdin)."
    ),
    server: str = SERVER,
    token: str = TOKEN,
    socket: str = SOCKET,
) -> None:
    """Create or update every object of the files, all at once or none at all."""
    api = apiclient.client(server, token, socket)
    payload = _read_files(files)
    result = apiclient.call(lambda: api.post("/api/v1/apply", {"files": payload}))
    _print_results(result["results"])


def delete(
    kind: str = typer.Argument(None, help="Kind (e.g. job, workload, clusterqueue), when not using -f."),
    name: str = typer.Argument(None, help="Name of the object."),
    files: list[Path] = typer.Option(None, "--filename", "-f", help="Delete the objects of these files."),
    namespace: str = NAMESPACE,
    server: str = SERVER,
    token: str = TOKEN,
    socket: str = SOCKET,
) -> None:
    """Delete one object (KIND NAME) or every object of -f files."""
    api = apiclient.client(server, token, socket)
    targets: list[tuple[str, str, str]] = []
    if files:
        import yaml

        for item in _read_files(files):
            try:
                docs = list(yaml.safe_load_all(item["text"]))
            except yaml.YAMLError as exc:
                typer.echo(f"error: {item['name']}: not valid YAML: {exc}", err=True)
                raise typer.Exit(1) from None
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind"):
                    meta = doc.get("metadata") or {}
                    ns = meta.get("namespace") or ("default" if _namespaced(doc["kind"]) else "_")
                    targets.append((doc["kind"], ns, meta.get("name", "")))
    elif kind and name and _kind(kind) == "Identity":
        result = apiclient.call(lambda: api.delete(f"/api/v1/identities/{name}"))
        typer.echo(f"{result['deleted']} deleted")
        return
    elif kind and name:
        real = _kind(kind)
        targets.append((real, namespace if _namespaced(real) else "_", name))
    else:
        typer.echo("error: give KIND NAME or -f FILE", err=True)
        raise typer.Exit(1)
    for real, ns, obj_name in targets:
        path = f"/api/v1/objects/{real}/{ns}/{obj_name}"
        result = apiclient.call(lambda path=path: api.delete(path))  # type: ignore[misc]
        typer.echo(f"{result['deleted']} deleted")


_KINDS = {
    "job": "Job",
    "jobs": "Job",
    "jobset": "JobSet",
    "jobsets": "JobSet",
    "workload": "Workload",
    "workloads": "Workload",
    "clusterqueue": "ClusterQueue",
    "clusterqueues": "ClusterQueue",
    "cq": "ClusterQueue",
    "localqueue": "LocalQueue",
    "localqueues": "LocalQueue",
    "lq": "LocalQueue",
    "resourceflavor": "ResourceFlavor",
    "cohort": "Cohort",
    "workloadpriorityclass": "WorkloadPriorityClass",
    "identity": "Identity",
    "identities": "Identity",
}


def _kind(text: str) -> str:
    return _KINDS.get(text.lower(), text)


def _namespaced(kind: str) -> bool:
    return kind in ("Job", "JobSet", "Workload", "LocalQueue", "LimitRange")


# ---------------------------------------------------------------- reading


def _set_active(
    verb: str, what: str, name: str, namespace: str, server: str | None, token: str | None, socket: str | None
) -> None:
    kind = {
        "workload": "workload",
        "wl": "workload",
        "job": "workload",
        "clusterqueue": "clusterqueue",
        "cq": "clusterqueue",
    }.get(what.lower())
    if kind is None:
        typer.echo(f"error: cannot {verb} {what!r}: choose workload or clusterqueue", err=True)
        raise typer.Exit(1)
    api = apiclient.client(server, token, socket)
    result = apiclient.call(
        lambda: api.post(f"/api/v1/{verb}", {"kind": kind, "namespace": namespace, "name": name})
    )
    typer.echo(" ".join(f"{k}={v}" for k, v in result.items()))


def stop(
    what: str = typer.Argument(..., help="workload or clusterqueue"),
    name: str = typer.Argument(...),
    namespace: str = NAMESPACE,
    server: str = SERVER,
    token: str = TOKEN,
    socket: str = SOCKET,
) -> None:
    """Stop a workload (spec.active=false: evicted, not requeued) or a ClusterQueue (stopPolicy Hold)."""
    _set_active("stop", what, name, namespace, server, token, socket)


def resume(
    what: str = typer.Argument(..., help="workload or clusterqueue"),
    name: str = typer.Argument(...),
    namespace: str = NAMESPACE,
    server: str = SERVER,
    token: str = TOKEN,
    socket: str = SOCKET,
) -> None:
    """Resume a stopped workload or ClusterQueue."""
    _set_active("resume", what, name, namespace, server, token, socket)


def token(
    action: str = typer.Argument(..., help="create | revoke | list"),
    name: str = typer.Argument(None, help="Identity name."),
    role: str = typer.Option("tenant", "--role", help="admin or tenant"),
    namespaces: list[str] = typer.Option(
        None, "--namespace", "-n", help="Namespaces a tenant may submit to."
    ),
    priority_classes: list[str] = typer.Option(
        None, "--priority-class", help="Priority classes a tenant may use."
    ),
    unix_user: str = typer.Option(
        None, "--unix-user", help="Local user it is: uses the socket without a token; its jobs run as it."
    ),
    server: str = SERVER,
    token: str = TOKEN,
    socket: str = SOCKET,
) -> None:
    """Identities (admins only): create one and print its new token, revoke its token, list them.

    `create` on an existing name replaces it and its token. `revoke` makes its token useless at
    once (the identity stays; `create` gives it a new one). `pykueue delete identity NAME`
    removes it.
    """
    if action not in ("create", "revoke", "list"):
        typer.echo("error: choose create, revoke or list", err=True)
        raise typer.Exit(1)
    if action != "list" and not name:
        typer.echo(f"error: token {action} needs a NAME", err=True)
        raise typer.Exit(1)
    api = apiclient.client(server, token, socket)
    if action == "list":
        rows = apiclient.call(lambda: api.get("/api/v1/identities"))
        queries.table(
            [
                [
                    r["name"],
                    r["role"],
                    ",".join(r["namespaces"]),
                    ",".join(r["priorityClasses"]),
                    r.get("unixUser", ""),
                ]
                for r in rows
            ],
            ["NAME", "ROLE", "NAMESPACES", "PRIORITY CLASSES", "UNIX USER"],
        )
        return
    if action == "revoke":
        result = apiclient.call(lambda: api.post(f"/api/v1/identities/{name}/revoke", {}))
        typer.echo(f"the token of {result['revoked']} is revoked")
        return
    body: dict[str, Any] = {
        "name": name,
        "role": role,
        "namespaces": namespaces or [],
        "priorityClasses": priority_classes or [],
    }
    if unix_user:
        body["unixUser"] = unix_user
    result = apiclient.call(lambda: api.post("/api/v1/identities", body))
    typer.echo(result["token"])
