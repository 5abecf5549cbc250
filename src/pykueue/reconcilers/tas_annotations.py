"""A job's topology annotations: the webhook's rules for them, and the request they make.

A job asks for topology-aware scheduling with annotations on its pod templates
(``kueue.x-k8s.io/podset-required-topology`` and its siblings, named in
`pykueue.engine.topology_requests`). Two things follow from them, as upstream's
jobframework does it:

    problems(job)            the webhook refuses what cannot be meant: two of required,
                             preferred and unconstrained; a level that is not a label name;
                             a slice size without a slice level (or the reverse), or one that
                             is not a positive number; a pod set group without a level
    topology_request(meta)   the Workload's ``spec.podSets[].topologyRequest``, read from one
                             pod template's annotations

Pod templates are found by walking the job: every ``template`` (or ``...Template``) map
that holds a pod spec, so one walk serves every kind (``spec.template`` of a Job,
``spec.replicatedJobs[i].template.spec.template`` of a JobSet,
``spec.pytorchReplicaSpecs[Master].template`` of a Kubeflow job, the leader and worker
templates of a LeaderWorkerSet). A map key starting with a capital letter is a replica
type (Kubeflow, MPI) and is written ``[Key]`` in the path, as upstream writes map keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pykueue.api.meta import qualified_name_errors
from pykueue.engine import topology_requests as tr
from pykueue.errors import FieldProblem
from pykueue.store.base import Manifest

_EXCLUSIVE = (tr.REQUIRED, tr.PREFERRED, tr.UNCONSTRAINED)
_INT32 = re.compile(r"[+-]?[0-9]+")
_TRUE = ("1", "t", "T", "true", "TRUE", "True")
_FALSE = ("0", "f", "F", "false", "FALSE", "False")


def _go(value: str) -> str:
    # Go's %q of a string, as the API server quotes a refused value.
    return json.dumps(value)


def pod_templates(job: Manifest) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template of ``job``, with the field path of its ``metadata``."""
    spec = job.get("spec")
    if isinstance(spec, dict) and "containers" in spec:
        yield "metadata", job  # a pod of its own (a plain pod, a member of a pod group)
    elif isinstance(spec, dict):
        yield from _walk(spec, "spec")


def _is_pod_template(key: str, value: dict[str, Any]) -> bool:
    spec = value.get("spec")
    if isinstance(spec, dict) and "containers" in spec:
        return True
    # A Job's template written without containers yet still is its pod template; a template
    # whose spec holds a template of its own (a JobSet's job template) is not.
    return key == "template" and not (isinstance(spec, dict) and isinstance(spec.get("template"), dict))


def _walk(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, f"{path}[{index}]")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if not isinstance(value, (dict, list)):
            continue
        here = f"{path}[{key}]" if key[:1].isupper() else f"{path}.{key}"
        named = key == "template" or key.endswith("Template")
        if isinstance(value, dict) and named and _is_pod_template(key, value):
            yield f"{here}.metadata", value
            continue
        yield from _walk(value, here)


def _annotations(template: Mapping[str, Any]) -> dict[str, str]:
    meta = template.get("metadata") or {}
    found = meta.get("annotations") if isinstance(meta, dict) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def problems(job: Manifest) -> list[FieldProblem]:
    """Upstream's rules for the topology annotations of every pod template of ``job``."""
    found: list[FieldProblem] = []
    for path, template in pod_templates(job):
        found.extend(template_problems(f"{path}.annotations", _annotations(template)))
    return found


def template_problems(path: str, annotations: Mapping[str, str]) -> list[FieldProblem]:
    """The problems of one pod template's annotations; ``path`` names its annotations."""

    def key(name: str) -> str:
        return f"{path}[{name}]"

    out: list[FieldProblem] = []
    if sum(name in annotations for name in _EXCLUSIVE) > 1:
        names = ", ".join(_go(name) for name in _EXCLUSIVE)
        out.append(
            FieldProblem(
                path, f"Invalid value: must not contain more than one topology annotation: [{names}]"
            )
        )
    for name in (tr.REQUIRED, tr.PREFERRED, tr.SLICE_REQUIRED):
        if name in annotations:
            value = annotations[name]
            out.extend(
                FieldProblem(key(name), f"Invalid value: {_go(value)}: {error}")
                for error in qualified_name_errors(value)
            )
    group = annotations.get(tr.GROUP_NAME)
    if group is not None:
        if group.isdigit():
            out.append(FieldProblem(key(tr.GROUP_NAME), f"Invalid value: {_go(group)}: must not be a number"))
        for other in (tr.SLICE_SIZE, tr.SLICE_REQUIRED):
            if other in annotations:
                out.append(
                    FieldProblem(key(tr.GROUP_NAME), f"Forbidden: may not be set when '{other}' is specified")
                )
        if tr.REQUIRED not in annotations and tr.PREFERRED not in annotations:
            out.append(
                FieldProblem(
                    key(tr.GROUP_NAME),
                    f"Forbidden: may not be set when neither '{tr.PREFERRED}' nor '{tr.REQUIRED}' is specified",
                )
            )
    unconstrained = annotations.get(tr.UNCONSTRAINED)
    if unconstrained is not None and unconstrained not in _TRUE + _FALSE:
        out.append(
            FieldProblem(
                key(tr.UNCONSTRAINED), f"Invalid value: {_go(unconstrained)}: must be a boolean value"
            )
        )
    size = annotations.get(tr.SLICE_SIZE)
    if size is not None:
        if not _INT32.fullmatch(size) or not -(2**31) <= int(size) < 2**31:
            # Go's strconv.ParseInt(size, 10, 32): digits with an optional sign, in range.
            out.append(
                FieldProblem(key(tr.SLICE_SIZE), f"Invalid value: {_go(size)}: must be a numeric value")
            )
        else:
            if int(size) < 1:
                out.append(
                    FieldProblem(
                        key(tr.SLICE_SIZE), f"Invalid value: {_go(size)}: must be greater than or equal to 1"
                    )
                )
    if tr.SLICE_REQUIRED in annotations and size is None:
        out.append(
            FieldProblem(
                key(tr.SLICE_SIZE), f"Required value: must be set when '{tr.SLICE_REQUIRED}' is specified"
            )
        )
    if tr.SLICE_REQUIRED not in annotations and size is not None:
        out.append(
            FieldProblem(
                key(tr.SLICE_SIZE), f"Forbidden: may not be set when '{tr.SLICE_REQUIRED}' is not specified"
            )
        )
    return out


def topology_request(
    annotations: Mapping[str, str], indexes: Mapping[str, Any] | None = None
) -> Manifest | None:
    """The ``topologyRequest`` of a Workload pod set made from a template with ``annotations``.

    As upstream's request builder: one of required, preferred or unconstrained (in that
    order), the slice layer(s), the group name (with a level only), and ``indexes``: how the
    kind numbers its pods (``podIndexLabel``, ``subGroupIndexLabel``, ``subGroupCount``).
    A template without topology annotations gives None: unlike upstream, which writes the
    index labels alone on every pod set of a kind that has them, so that a Workload of a job
    that asks nothing of the topology stays as it was. Annotations the webhook would refuse
    (a slice size that is not a number, an unconstrained value that is not a boolean, bad
    JSON) give None too: the Workload keeps the annotations, and the engine says what is
    wrong with them when it reads them.
    """
    request: Manifest = {}
    if tr.REQUIRED in annotations:
        request["required"] = annotations[tr.REQUIRED]
    elif tr.PREFERRED in annotations:
        request["preferred"] = annotations[tr.PREFERRED]
    elif tr.UNCONSTRAINED in annotations:
        value = annotations[tr.UNCONSTRAINED]
        if value not in _TRUE + _FALSE:
            return None
        request["unconstrained"] = value in _TRUE
    if tr.SLICE_CONSTRAINTS in annotations:
        try:
            layers = json.loads(annotations[tr.SLICE_CONSTRAINTS])
        except json.JSONDecodeError:
            return None
        if not isinstance(layers, list) or not 1 <= len(layers) <= tr.MAX_SLICE_LAYERS:
            return None
        request["podsetSliceRequiredTopologyConstraints"] = layers
    elif tr.SLICE_REQUIRED in annotations and tr.SLICE_SIZE in annotations:
        size = annotations[tr.SLICE_SIZE]
        if not _INT32.fullmatch(size) or not -(2**31) <= int(size) < 2**31:
            return None
        request["podSetSliceRequiredTopology"] = annotations[tr.SLICE_REQUIRED]
        request["podSetSliceSize"] = int(size)
    if not request:
        return None
    request.update({k: v for k, v in (indexes or {}).items() if v is not None})
    if tr.GROUP_NAME in annotations and ("required" in request or "preferred" in request):
        request["podSetGroupName"] = annotations[tr.GROUP_NAME]
    return request
