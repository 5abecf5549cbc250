"""``apply``: many documents, checked in full, then stored all at once or not at all.

    decode      each file's YAML (a List is read item by item)      -> ParseError: file: message
    validate    manifests.parse_object, STRICT, every document      -> file#doc Kind/name path: message
                at most inputs.MAX_OBJECT_BYTES per object          -> TooLarge (413)
    authorize   auth.write_refusal for the caller                   -> 403, one line per object
                a tenant's Workload priority is its class's value   -> 403
    check       references a user would otherwise wait on forever:  -> file#doc Kind/name: message
                a Job or JobSet names a LocalQueue that exists (here or in the same apply),
                a priority class that exists; a JobSet is one this machine can run
                (its Workload passes the Workload rules, each Job a gang)
    hand over   a Job queued in a ClusterQueue with a MultiKueue check gets
                spec.managedBy kueue.x-k8s.io/multikueue (this server runs it on a worker)
    own         a Job records who submitted it and whom it runs as  -> `owners`
    store       one store transaction: created / configured / unchanged

Nothing is stored unless every document passes every step, so a refused apply
never leaves half a queue setup behind. Objects are stored as
`manifests.to_manifest` writes them (v1beta2, defaults filled in). A Job (or JobSet) is
stored suspended, as Kueue's webhook does, so nothing runs before admission;
its spec cannot be changed once submitted (delete and submit again).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from pykueue.api import manifests, semantic
from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.controllers import integrations, local_jobset
from pykueue.controllers.accounts import AccountError
from pykueue.errors import FieldProblem, InputError, NotFound, ParseError, ValidationError
from pykueue.server import auth, owners
from pykueue.server.inputs import MAX_OBJECT_BYTES, object_size
from pykueue.store.base import Key, Manifest, authored_by

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_KINDS = ("WorkloadPriorityClass", "PriorityClass")
JOB_KINDS = ("Job", "JobSet")  # what runs on this machine, queued with the queue label


class Refused(Exception):
    """The caller may not do this (HTTP 403); ``problems`` says why, object by object."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class TooLarge(InputError):
    """One object is larger than an object may be (HTTP 413)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class Document:
    source: str  # file#N
    manifest: Manifest  # as it will be stored


@dataclass
class ApplyResult:
    actions: list[dict[str, str]] = field(default_factory=list)


def decode(files: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """(source, raw document) for every document of every (name, text) file."""
    out: list[tuple[str, Any]] = []
    for name, text in files:
        try:
            docs = list(yaml.load_all(text, Loader=_Loader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ParseError(f"{name}:{where}: not valid YAML: {problem}") from None
        index = 0
        for doc in docs:
            if doc is None:
                continue
            index += 1
            if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
                items = doc.get("items") or []
                if not isinstance(items, list):
                    raise ParseError(f"{name}#{index}: items of a {doc.get('kind')} must be a list")
                for sub, item_doc in enumerate(items, start=1):
                    out.append((f"{name}#{index}.{sub}", item_doc))
            else:
                out.append((f"{name}#{index}", doc))
    if not out:
        raise ParseError("nothing to apply: the input holds no documents")
    return out


def validate(raw: list[tuple[str, Any]]) -> list[Document]:
    """Every document parsed STRICT; all problems of all documents raised together."""
    problems: list[FieldProblem] = []
    too_large: list[str] = []
    documents: list[Document] = []
    for source, doc in raw:
        try:
            parsed = manifests.parse_object(doc, source=source)
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        stored = manifests.to_manifest(parsed)
        size = object_size(stored)
        if size > MAX_OBJECT_BYTES:
            too_large.append(
                f"{source} {manifests.object_ref(stored)}: {size} bytes; an object may be at most {MAX_OBJECT_BYTES}"
            )
            continue
        owners.strip_server_annotations(stored)
        meta = stored.setdefault("metadata", {})
        if stored.get("kind") in (*JOB_KINDS, "Workload", "LocalQueue", "LimitRange") and not meta.get(
            "namespace"
        ):
            meta["namespace"] = "default"
        for field_name in ("resourceVersion", "uid", "generation", "creationTimestamp"):
            meta.pop(field_name, None)
        stored.pop("status", None)  # status is the controllers' to write, never the user's
        documents.append(Document(source, stored))
    if too_large:
        raise TooLarge(too_large)
    if problems:
        raise ValidationError(problems)
    return documents


def authorize(identity: auth.Identity, documents: list[Document]) -> None:
    refusals = []
    for doc in documents:
        why = auth.write_refusal(identity, doc.manifest)
        if why:
            refusals.append(f"{doc.source} {manifests.object_ref(doc.manifest)}: {why}")
    if refusals:
        raise Refused(refusals)


async def check_priorities(store: Any, identity: auth.Identity, documents: list[Document]) -> None:
    """A tenant's Workload may not choose its priority: it is its priority class's value (or 0)."""
    if identity.is_admin:
        return
    refusals = []
    for doc in documents:
        spec = doc.manifest.get("spec") or {}
        if doc.manifest.get("kind") != "Workload" or spec.get("priority") is None:
            continue
        ref = spec.get("priorityClassRef") or {}
        expected, source = 0, "no priority class"
        if ref.get("name"):
            kind = "PriorityClass" if ref.get("kind") == "PriorityClass" else "WorkloadPriorityClass"
            source = f"{kind} {ref['name']}"
            try:
                expected = int((await store.get(kind, "", ref["name"])).get("value") or 0)
            except NotFound:
                expected = 0
        if spec["priority"] != expected:
            refusals.append(
                f"{doc.source} {manifests.object_ref(doc.manifest)}: tenant {identity.name} may not set "
                f"spec.priority to {spec['priority']}: a Workload's priority comes from its priority class "
                f"({source}: {expected}); leave spec.priority out"
            )
    if refusals:
        raise Refused(refusals)


async def check_references(store: Any, documents: list[Document]) -> None:
    """Refuse what could only wait forever: an unknown LocalQueue or priority class."""
    incoming = {Key.of(d.manifest) for d in documents}
    problems: list[FieldProblem] = []
    for doc in documents:
        obj = doc.manifest
        kind = obj.get("kind")
        if kind not in (*JOB_KINDS, "Workload"):
            continue
        ref = manifests.object_ref(obj)
        namespace = obj["metadata"]["namespace"]
        if kind == "JobSet":
            problems.extend(_jobset_problems(doc))
        if kind in JOB_KINDS:
            queue = (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL, "")
            path = f"metadata.labels[{QUEUE_LABEL}]"
        else:
            queue = (obj.get("spec") or {}).get("queueName", "")
            path = "spec.queueName"
        if not queue:
            names = await _queue_names(store, namespace)
            problems.append(
                FieldProblem(
                    path,
                    f"name the LocalQueue to submit to (queues in {namespace}: {names})",
                    ref,
                    doc.source,
                )
            )
        elif Key("LocalQueue", namespace, queue) not in incoming and not await _exists(
            store, "LocalQueue", namespace, queue
        ):
            names = await _queue_names(store, namespace)
            problems.append(
                FieldProblem(
                    path,
                    f"LocalQueue {namespace}/{queue} does not exist (queues in {namespace}: {names})",
                    ref,
                    doc.source,
                )
            )
        wanted = auth.priority_class_of(obj)
        known = [
            Key(k, "", wanted) in incoming or await _exists(store, k, "", wanted) for k in PRIORITY_KINDS
        ]
        if wanted and not any(known):
            problems.append(FieldProblem("", f"priority class {wanted} does not exist", ref, doc.source))
    if problems:
        raise ValidationError(problems)


def _jobset_problems(doc: Document) -> list[FieldProblem]:
    """What keeps a valid JobSet from running here: a Workload Kueue would refuse (more pod sets
    than a Workload may have, ...), or a replicated job that is not one gang of pods."""
    obj = doc.manifest
    ref = manifests.object_ref(obj)
    integration = integrations.by_kind(str(obj.get("apiVersion")), "JobSet")
    assert integration is not None
    problems = [
        FieldProblem(p.path, p.message, ref, doc.source) for p in integrations.check_job(obj, integration)
    ]
    if not problems and not local_jobset.pods(obj):
        message = "runs no pod (every replicated job has replicas or parallelism 0): it could never finish"
        problems.append(FieldProblem("spec.replicatedJobs", message, ref, doc.source))
    for i, replicated in enumerate((obj.get("spec") or {}).get("replicatedJobs") or []):
        spec = (replicated.get("template") or {}).get("spec") or {}
        parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
        completions = spec.get("completions")
        if completions is not None and int(completions) > parallelism:
            problems.append(
                FieldProblem(
                    f"spec.replicatedJobs[{i}].template.spec.completions",
                    f"{completions} is more than parallelism {parallelism}: standalone mode runs each Job of a "
                    "JobSet as one gang whose pods all run at once and once each (completions <= parallelism)",
                    ref,
                    doc.source,
                )
            )
    return problems


async def hand_over(store: Any, documents: list[Document]) -> None:
    """A Job queued in a ClusterQueue with a MultiKueue check is for MultiKueue to run on a
    worker, never here: give it ``spec.managedBy`` as upstream's Job webhook does, so that
    ``pykueue submit`` to a manager needs no flag. A managedBy the user set is kept."""
    incoming = {Key.of(d.manifest): d.manifest for d in documents}
    for doc in documents:
        obj = doc.manifest
        spec = obj.get("spec")
        if obj.get("kind") != "Job" or not isinstance(spec, dict) or spec.get("managedBy"):
            continue
        queue = (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL, "")
        local = await _current(store, incoming, Key("LocalQueue", obj["metadata"]["namespace"], queue))
        cq_name = str(((local or {}).get("spec") or {}).get("clusterQueue") or "")
        cq = await _current(store, incoming, Key("ClusterQueue", "", cq_name)) if cq_name else None
        for check in _check_names(cq or {}):
            found = await _current(store, incoming, Key("AdmissionCheck", "", check))
            if ((found or {}).get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                spec["managedBy"] = MULTIKUEUE_CONTROLLER
                break


def _check_names(cluster_queue: Manifest) -> list[str]:
    spec = cluster_queue.get("spec") or {}
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return [str(n) for n in spec.get("admissionChecks") or []] + [str(c.get("name")) for c in strategy]


async def _current(store: Any, incoming: dict[Key, Manifest], key: Key) -> Manifest | None:
    """``key`` as it will be after this apply: from the same apply, else from the store."""
    if key in incoming:
        return incoming[key]
    try:
        found: Manifest = await store.get(key.kind, key.namespace, key.name)
    except NotFound:
        return None
    return found


async def _exists(store: Any, kind: str, namespace: str, name: str) -> bool:
    try:
        await store.get(kind, namespace, name)
    except NotFound:
        return False
    return True


async def _queue_names(store: Any, namespace: str) -> str:
    items, _ = await store.list("LocalQueue", namespace)
    return ", ".join(sorted(i["metadata"]["name"] for i in items)) or "none"


async def store_all(store: Any, documents: list[Document]) -> ApplyResult:
    """Create or update every document in one transaction."""
    result = ApplyResult()
    async with store.transaction():
        for doc in documents:
            obj = doc.manifest
            key = Key.of(obj)
            if not key.name:
                # generateName: a new object each time, named as the API server would.
                key = await _generated_key(store, obj)
                current = None
            else:
                try:
                    current = await store.get(key.kind, key.namespace, key.name)
                except NotFound:
                    current = None
            if current is None:
                if key.kind in JOB_KINDS:
                    obj.setdefault("spec", {})["suspend"] = True
                await store.create(obj)
                action = "created"
            elif _same(obj, current):
                action = "unchanged"
            elif key.kind in JOB_KINDS:
                raise ValidationError(
                    [
                        FieldProblem(
                            "spec",
                            f"a submitted {key.kind} cannot be changed; delete it and submit it again",
                            manifests.object_ref(obj),
                            doc.source,
                        )
                    ]
                )
            else:
                update = dict(obj)
                update["metadata"] = {**current["metadata"], **obj["metadata"]}
                await store.update(update)
                action = "configured"
            result.actions.append(
                {"kind": key.kind, "namespace": key.namespace, "name": key.name, "action": action}
            )
    return result


# The API server's alphabet for generated name suffixes: no vowels, no look-alike digits.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


async def _generated_key(store: Any, obj: Manifest) -> Key:
    """Give ``obj`` a free name: its ``generateName`` plus five random characters."""
    meta = obj["metadata"]
    for _ in range(8):
        suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
        meta["name"] = f"{meta['generateName']}{suffix}"
        key = Key.of(obj)
        if not await _exists(store, key.kind, key.namespace, key.name):
            return key
    raise ValidationError(
        [FieldProblem("metadata.generateName", "no free name found", manifests.object_ref(obj))]
    )


def _same(new: Manifest, current: Manifest) -> bool:
    # Semantic equality: `cpu: 1` applied again over a stored "1" is no change.
    if new.get("kind") == "JobSet":
        return semantic.equal(_without_suspend(new), _without_suspend(current))
    if new.get("kind") == "Job":
        # The adapter owns suspend and parallelism (partial admission): compare the user's part.
        mine = {k: v for k, v in (new.get("spec") or {}).items() if k not in ("suspend", "parallelism")}
        theirs = {k: v for k, v in (current.get("spec") or {}).items() if k not in ("suspend", "parallelism")}
        return semantic.equal(mine, theirs)
    keys = set(new) | set(current)
    return all(semantic.equal(new.get(k), current.get(k)) for k in keys if k not in ("metadata", "status"))


def _without_suspend(obj: Manifest) -> Manifest:
    return {k: v for k, v in (obj.get("spec") or {}).items() if k != "suspend"}


async def own(documents: list[Document], identity: auth.Identity, owning: owners.Owners) -> None:
    """Record on every Job who submitted it and whom it will run as (a user may be made now)."""
    jobs = [d for d in documents if d.manifest.get("kind") in owners.RUNNABLE_KINDS]
    if not jobs:
        return
    try:
        owner = await owning.run_as(identity)
    except AccountError as exc:
        raise Refused([f"{jobs[0].source} {manifests.object_ref(jobs[0].manifest)}: {exc}"]) from None
    for doc in jobs:
        owners.stamp(doc.manifest, identity, owner)


async def apply(
    store: Any,
    identity: auth.Identity,
    files: Sequence[tuple[str, str]],
    owning: owners.Owners,
    author: str | None = None,
) -> ApplyResult:
    """The whole pipeline; raises InputError (400/413/422) or Refused (403) with every problem.

    ``author`` is whom policy history records the changes as made by (default: the identity).
    """
    documents = validate(decode(files))
    authorize(identity, documents)
    await check_priorities(store, identity, documents)
    await check_references(store, documents)
    await hand_over(store, documents)
    await own(documents, identity, owning)
    with authored_by(author or auth.author(identity)):
        return await store_all(store, documents)


__all__ = ["ApplyResult", "InputError", "Refused", "TooLarge", "apply"]
