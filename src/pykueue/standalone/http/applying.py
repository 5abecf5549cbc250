"""``apply``: many documents, checked in full, then stored all at once or not at all.

    decode      each file's YAML (a List is read item by item)      -> ParseError: file: message
                (with validate: in worker threads, in chunks, `apply_parsing`)
    validate    manifests.parse_object, SUBMITTED, every document   -> file#doc Kind/name path: message
                (STRICT, and no unknown field inside a pod template or a Job/JobSet spec)
                at most inputs.MAX_OBJECT_BYTES per object          -> TooLarge (413)
    authorize   access.write_refusal for the caller                   -> 403, one line per object
                a tenant's Workload priority is its class's value   -> 403
    limit       `job_limits`: containers without requests get the   -> file#doc Kind/name spec.parallelism: ...
                config's defaults (for what their ClusterQueue covers);
                at most limits.maxPodsPerJob pods per job
                `tenant_limits`: a tenant's namespace holds at most  -> 429
                limits.maxObjects Jobs, JobSets and Workloads
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

import copy
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pykueue.api import access, governance, manifests, semantic
from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.errors import FieldProblem, InputError, NotFound, ValidationError
from pykueue.reconcilers import integrations
from pykueue.standalone.http import apply_parsing, job_limits, owners, tenant_limits
from pykueue.standalone.http.apply_parsing import JOB_KINDS, Document
from pykueue.standalone.http.limits import Limits
from pykueue.standalone.node import local_jobset
from pykueue.standalone.node.accounts import AccountError
from pykueue.standalone.node.isolation import SERVER_ANNOTATION_PREFIX
from pykueue.store.base import Key, Manifest, authored_by

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_KINDS = ("WorkloadPriorityClass", "PriorityClass")


class Refused(Exception):
    """The caller may not do this (HTTP 403); ``problems`` says why, object by object."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass
class ApplyResult:
    actions: list[dict[str, str]] = field(default_factory=list)


def authorize(identity: access.Identity, documents: list[Document]) -> None:
    refusals = []
    for doc in documents:
        why = access.write_refusal(identity, doc.manifest)
        if why:
            refusals.append(f"{doc.source} {manifests.object_ref(doc.manifest)}: {why}")
    if refusals:
        raise Refused(refusals)


async def check_priorities(store: Any, identity: access.Identity, documents: list[Document]) -> None:
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
        wanted = access.priority_class_of(obj)
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
        local = await job_limits.as_applied(
            store, incoming, Key("LocalQueue", obj["metadata"]["namespace"], queue)
        )
        cq_name = str(((local or {}).get("spec") or {}).get("clusterQueue") or "")
        cq = (
            await job_limits.as_applied(store, incoming, Key("ClusterQueue", "", cq_name))
            if cq_name
            else None
        )
        for check in _check_names(cq or {}):
            found = await job_limits.as_applied(store, incoming, Key("AdmissionCheck", "", check))
            if ((found or {}).get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                spec["managedBy"] = MULTIKUEUE_CONTROLLER
                break


def _check_names(cluster_queue: Manifest) -> list[str]:
    spec = cluster_queue.get("spec") or {}
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    return [str(n) for n in spec.get("admissionChecks") or []] + [str(c.get("name")) for c in strategy]


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
                if key.kind == "Workload":
                    _check_pod_sets(obj, current, doc.source)
                update = dict(obj)
                update["metadata"] = _merged_metadata(obj, current)
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


def _user_metadata(obj: Manifest) -> dict[str, Any]:
    """The labels and annotations the user writes: the server's own annotations left out."""
    kept: Manifest = copy.deepcopy(obj.get("metadata") or {})
    owners.strip_server_annotations({"kind": obj.get("kind"), "metadata": kept})
    return {k: kept.get(k) or {} for k in ("labels", "annotations")}


def _merged_metadata(new: Manifest, current: Manifest) -> Manifest:
    """``current``'s metadata with the user's labels and annotations replaced by ``new``'s, as an
    apply of the whole object does: one left out is removed (a policy annotation among them).
    The server's own annotations stay."""
    meta = {**current["metadata"], **new["metadata"]}
    policies = governance.KEYS_BY_KIND.get(str(new.get("kind")), frozenset())
    server_owned = {
        k: v
        for k, v in (current["metadata"].get("annotations") or {}).items()
        if str(k).startswith(SERVER_ANNOTATION_PREFIX) and k not in policies
    }
    for name, value in (
        ("labels", new["metadata"].get("labels")),
        ("annotations", new["metadata"].get("annotations")),
    ):
        merged = {**(value or {}), **(server_owned if name == "annotations" else {})}
        if merged:
            meta[name] = merged
        else:
            meta.pop(name, None)
    return meta


def _check_pod_sets(new: Manifest, current: Manifest, source: str) -> None:
    """A Workload's pod sets are fixed while it holds quota, as upstream's webhook keeps them:
    the quota was reserved for those pods."""
    if not _holds_quota(current):
        return
    if semantic.equal((new.get("spec") or {}).get("podSets"), (current.get("spec") or {}).get("podSets")):
        return
    message = (
        "field is immutable while the Workload has quota reserved "
        "(deactivate it, or delete it and submit it again)"
    )
    raise ValidationError([FieldProblem("spec.podSets", message, manifests.object_ref(new), source)])


def _holds_quota(workload: Manifest) -> bool:
    status = workload.get("status") or {}
    if status.get("admission"):
        return True
    return any(
        c.get("type") == "QuotaReserved" and c.get("status") == "True"
        for c in status.get("conditions") or []
        if isinstance(c, dict)
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
    if _user_metadata(new) != _user_metadata(current):
        return False
    return all(semantic.equal(new.get(k), current.get(k)) for k in keys if k not in ("metadata", "status"))


def _without_suspend(obj: Manifest) -> Manifest:
    return {k: v for k, v in (obj.get("spec") or {}).items() if k != "suspend"}


async def own(documents: list[Document], identity: access.Identity, owning: owners.Owners) -> None:
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
    identity: access.Identity,
    files: Sequence[tuple[str, str]],
    owning: owners.Owners,
    author: str | None = None,
    limits: Limits | None = None,
) -> ApplyResult:
    """The whole pipeline; raises InputError (400/413/422), Refused (403) or, for a tenant
    over ``limits``, TooManyRequests (429) with every problem.

    ``author`` is whom policy history records the changes as made by (default: the identity).
    """
    limits = limits or Limits()
    documents = await apply_parsing.parse(
        files, lambda raw: tenant_limits.check_document_count(identity, raw, limits)
    )
    authorize(identity, documents)
    await job_limits.apply_limits(store, documents, limits)
    await tenant_limits.check_room(store, identity, (d.manifest for d in documents), limits)
    await check_priorities(store, identity, documents)
    await check_references(store, documents)
    await hand_over(store, documents)
    await own(documents, identity, owning)
    with authored_by(author or access.author(identity)):
        return await store_all(store, documents)


__all__ = ["ApplyResult", "InputError", "Refused", "apply"]
