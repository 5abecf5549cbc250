"""Reading manifests into models, and writing models back: the API layer's front door.

    load_paths(paths)          files and directories (*.yaml, *.yml, *.json) -> objects
    load_text(text, source)    one multi-document YAML text -> objects
    parse_object(doc, source)  one decoded document -> one object
    to_manifest(obj)           one object -> a v1beta2 document (camelCase, no empty noise)

Reading one document is a pipeline, each step upstream's own:

1. decode — YAML with libyaml's safe loader when available (a 10 MB file loads in
   seconds, and no YAML tag can build a Python object); nulls are pruned, as the API
   server prunes nulls from non-nullable fields;
2. dispatch — on ``apiVersion`` + ``kind``; ``kueue.x-k8s.io/v1beta1`` is converted to
   v1beta2 (`conversion`), the first API's ``Queue`` is refused with a pointer to
   LocalQueue, an unknown kind is refused with the kinds we know;
3. decode into the model — types, enums, sizes, names, quantities, unknown fields;
4. default (`defaults`, and the field defaults of the models);
5. validate (`validation`), upstream's webhook and CEL rules.

Nothing is half-returned: every problem of every document is collected, each with the
source (``file#N``, N counting documents from 1), the object (``Kind/name``) and the
field path, and raised as one `pykueue.errors.ValidationError`. Text that is not YAML
at all raises `pykueue.errors.ParseError`. Neither ever escapes as a bare traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pydantic
import yaml

from pykueue.api import conversion, defaults, governance, strict_fields, validation
from pykueue.api.admission_check import AdmissionCheck, ProvisioningRequestConfig
from pykueue.api.batch import Job
from pykueue.api.cluster_queue import ClusterQueue
from pykueue.api.cohort import Cohort
from pykueue.api.core import LimitRange, Namespace, Node, Pod, PriorityClass
from pykueue.api.jobset import JobSet
from pykueue.api.local_queue import LocalQueue
from pykueue.api.meta import CHECK_NAMES, KubeModel
from pykueue.api.multikueue import MultiKueueCluster, MultiKueueConfig
from pykueue.api.priority import WorkloadPriorityClass
from pykueue.api.resource_flavor import ResourceFlavor
from pykueue.api.topology import Topology
from pykueue.api.workload import Workload
from pykueue.errors import FieldProblem, ParseError, ValidationError

KubeObject = (
    ResourceFlavor
    | ClusterQueue
    | LocalQueue
    | Cohort
    | WorkloadPriorityClass
    | AdmissionCheck
    | ProvisioningRequestConfig
    | MultiKueueConfig
    | MultiKueueCluster
    | Topology
    | Workload
    | Namespace
    | LimitRange
    | PriorityClass
    | Node
    | Pod
    | Job
    | JobSet
)
"""Any object `parse_object` returns; each has ``.kind``, ``.api_version`` and ``.metadata``."""

KUEUE_GROUP: Final = "kueue.x-k8s.io"
_KUEUE_KINDS: Final[dict[str, type[KubeModel]]] = {
    "ResourceFlavor": ResourceFlavor,
    "ClusterQueue": ClusterQueue,
    "LocalQueue": LocalQueue,
    "Cohort": Cohort,
    "WorkloadPriorityClass": WorkloadPriorityClass,
    "AdmissionCheck": AdmissionCheck,
    "ProvisioningRequestConfig": ProvisioningRequestConfig,
    "MultiKueueConfig": MultiKueueConfig,
    "MultiKueueCluster": MultiKueueCluster,
    "Topology": Topology,
    "Workload": Workload,
}
_CORE_KINDS: Final[dict[tuple[str, str], type[KubeModel]]] = {
    ("v1", "Namespace"): Namespace,
    ("v1", "LimitRange"): LimitRange,
    ("v1", "Node"): Node,
    ("v1", "Pod"): Pod,
    ("scheduling.k8s.io/v1", "PriorityClass"): PriorityClass,
    ("batch/v1", "Job"): Job,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): JobSet,
}
KNOWN_KINDS: Final = tuple(sorted([*_KUEUE_KINDS, *(kind for _, kind in _CORE_KINDS)]))

MANIFEST_SUFFIXES: Final = (".yaml", ".yml", ".json")
MAX_FILE_BYTES: Final = 64 * 1024 * 1024
# A YAML alias can make a small file describe a huge tree ("billion laughs"); walking
# more nodes than this in one document means the input is hostile or broken.
MAX_NODES_PER_DOCUMENT: Final = 2_000_000
MAX_DEPTH: Final = 200

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """How strictly to read, for callers whose input is not meant for an API server.

    The default is the API server's strictness. Upstream's own unit tests build objects
    the API would refuse but the engine handles well, and scenario files derived from
    them do the same; `RELAXED` accepts those, and only those:

    * ``check_names=False``: object names and references need not be RFC 1123
      (``ClusterQueueA``, cohort ``ROOT``);
    * ``single_variable_pod_set=False``: several pod sets may have a ``minCount`` (the
      workload webhook allows one; the partial-admission reducer handles many).

    ``feature_gates`` are upstream's gate names; those the API layer consults
    (PartialAdmission) default to upstream's defaults.
    """

    check_names: bool = True
    single_variable_pod_set: bool = True
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    # Refuse unknown fields inside pod templates and Job/JobSet specs too (`strict_fields`),
    # as the API server does to what a user submits. Off for objects read back from an API
    # server, which may know fields newer than our table.
    unknown_core_fields: bool = False


STRICT: Final = LoadOptions()
RELAXED: Final = LoadOptions(check_names=False, single_variable_pod_set=False)
SUBMITTED: Final = LoadOptions(unknown_core_fields=True)
"""What `pykueue apply` and `pykueue validate` read: STRICT, and no unknown field anywhere."""


# --- one document -------------------------------------------------------------------------


def object_ref(doc: Mapping[str, Any]) -> str:
    """``Kind/name`` (``Kind/namespace/name`` when namespaced) from a raw document, best effort."""
    kind = doc.get("kind")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    kind_text = kind if isinstance(kind, str) and kind else "?"
    if not isinstance(name, str) or not name:
        return kind_text if kind_text != "?" else ""
    if isinstance(namespace, str) and namespace and defaults.is_namespaced(kind_text):
        return f"{kind_text}/{namespace}/{name}"
    if defaults.is_namespaced(kind_text):
        return f"{kind_text}/{defaults.DEFAULT_NAMESPACE}/{name}"
    return f"{kind_text}/{name}"


def parse_object(doc: Mapping[str, Any], source: str = "", options: LoadOptions = STRICT) -> KubeObject:
    """Decode, convert, default and validate one manifest; raise ValidationError on any problem."""
    if not isinstance(doc, Mapping):
        raise ValidationError(
            [FieldProblem("", f"a manifest must be a mapping, not {_type_name(doc)}", source=source)]
        )
    ref = object_ref(doc)
    try:
        cleaned = _prune(doc)
    except _TooBig as err:
        raise ValidationError([FieldProblem("", str(err), ref, source)]) from None
    model, cleaned, problems = _dispatch(cleaned)
    if model is None:
        raise ValidationError([FieldProblem(p.path, p.message, ref, source) for p in problems])
    unknown = strict_fields.problems(cleaned) if options.unknown_core_fields else []
    try:
        obj = model.model_validate(cleaned, context={CHECK_NAMES: options.check_names})
    except pydantic.ValidationError as err:
        problems.extend(_invented_hints(str(cleaned.get("kind")), _pydantic_problems(err)))
        problems = strict_fields.merge(unknown, problems)
        raise ValidationError([FieldProblem(p.path, p.message, ref, source) for p in problems]) from None
    problems = strict_fields.merge(unknown, problems)
    defaults.apply_defaults(obj, options.feature_gates)
    problems.extend(
        validation.validate(
            obj, check_names=options.check_names, single_variable_pod_set=options.single_variable_pod_set
        )
    )
    if problems:
        raise ValidationError([FieldProblem(p.path, p.message, ref, source) for p in problems])
    return obj  # type: ignore[return-value]  # every registered model is a KubeObject


def _dispatch(doc: dict[str, Any]) -> tuple[type[KubeModel] | None, dict[str, Any], list[FieldProblem]]:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    problems = []
    if not isinstance(api_version, str) or not api_version:
        problems.append(FieldProblem("apiVersion", "required field is missing (e.g. kueue.x-k8s.io/v1beta2)"))
    if not isinstance(kind, str) or not kind:
        problems.append(FieldProblem("kind", "required field is missing (e.g. ClusterQueue)"))
    if problems:
        return None, doc, problems
    assert isinstance(api_version, str) and isinstance(kind, str)
    if kind == "Queue":
        message = (
            "kind Queue is the first Kueue API's name for a namespaced queue and is not served any more; "
            f"use kind: LocalQueue with apiVersion: {conversion.V1BETA2} (spec.clusterQueue names its "
            "ClusterQueue; the ordering, spec.queueingStrategy, is the ClusterQueue's; a queue's priority "
            f"is the annotation {governance.DEFAULT_PRIORITY_CLASS}: docs/governance.md)"
        )
        return None, doc, [FieldProblem("kind", message)]
    group = api_version.rpartition("/")[0]
    if kind in _KUEUE_KINDS:
        if api_version == conversion.V1BETA2:
            return _KUEUE_KINDS[kind], doc, []
        if api_version == conversion.V1BETA1:
            converted, problems = conversion.v1beta1_to_v1beta2(doc)
            return _KUEUE_KINDS[kind], converted, problems
        served = f"{conversion.V1BETA2} (or {conversion.V1BETA1}, converted on read)"
        return None, doc, [FieldProblem("apiVersion", f"{kind} is not served as {api_version}; use {served}")]
    core = _CORE_KINDS.get((api_version, kind))
    if core is not None:
        return core, doc, []
    for (version, core_kind), _ in _CORE_KINDS.items():
        if core_kind == kind:
            return None, doc, [FieldProblem("apiVersion", f"{kind} is read as {version}, not {api_version}")]
    where = "in the Kueue API" if group == KUEUE_GROUP else f"for apiVersion {api_version}"
    message = f"unknown kind {kind!r} {where}; known kinds: {', '.join(KNOWN_KINDS)}"
    return None, doc, [FieldProblem("kind", message)]


# Fields people write from other queueing systems' (or early drafts') shapes, with where the
# real ones are. Only the message changes: the field is still refused.
_INVENTED: Final = {
    "spec.scheduling": "the queueing order is the ClusterQueue's spec.queueingStrategy "
    "(StrictFIFO or BestEffortFIFO); there is no spec.scheduling",
    "spec.priority": "a queue has no priority field; name a default WorkloadPriorityClass for its "
    f"workloads with the annotation {governance.DEFAULT_PRIORITY_CLASS} (docs/governance.md)",
    "spec.priorityClassName": "a queue has no priority field; name a default WorkloadPriorityClass for its "
    f"workloads with the annotation {governance.DEFAULT_PRIORITY_CLASS} (docs/governance.md)",
}


def _invented_hints(kind: str, problems: list[FieldProblem]) -> list[FieldProblem]:
    if kind not in ("ClusterQueue", "LocalQueue"):
        return problems
    result = []
    for p in problems:
        hint = _INVENTED.get(p.path) if p.message == "unknown field" else None
        result.append(FieldProblem(p.path, f"unknown field: {hint}", p.obj, p.source) if hint else p)
    return result


class _TooBig(Exception):
    pass


_SCALARS = frozenset({str, int, float, bool})


def _prune(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without null map values, refusing alias bombs and absurd nesting.

    Every value counts against the budget, as its container is walked; a scalar is
    taken as it is, without a call of its own: the controller reads every watched
    object through here, and most of a manifest's values are scalars.
    """
    budget = [MAX_NODES_PER_DOCUMENT - 1]  # the document itself is one value

    def walk(node: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _TooBig(f"document is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, Mapping):
            budget[0] -= len(node)
            if budget[0] < 0:
                raise _TooBig(
                    f"document has more than {MAX_NODES_PER_DOCUMENT} values (YAML aliases expanded)"
                )
            return {
                k: v if type(v) in _SCALARS else walk(v, depth + 1) for k, v in node.items() if v is not None
            }
        if isinstance(node, list):
            budget[0] -= len(node)
            if budget[0] < 0:
                raise _TooBig(
                    f"document has more than {MAX_NODES_PER_DOCUMENT} values (YAML aliases expanded)"
                )
            return [item if type(item) in _SCALARS else walk(item, depth + 1) for item in node]
        return node

    result = walk(doc, 0)
    assert isinstance(result, dict)
    return result


def _type_name(value: object) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
    }
    return names.get(type(value), type(value).__name__)


# Fields that are maps: a string after one of them is a key, written ``requests[cpu]`` as
# upstream writes it. (A list field is followed by an index, so names shared with list
# fields, like a ResourceGroup's ``flavors``, are safe here.)
_MAP_FIELDS: Final = frozenset(
    {
        "labels",
        "annotations",
        "nodeLabels",
        "nodeSelector",
        "matchLabels",
        "requests",
        "limits",
        "overhead",
        "capacity",
        "allocatable",
        "resourceUsage",
        "consumedResources",
        "flavors",
        "max",
        "min",
        "default",
        "defaultRequest",
        "maxLimitRequestRatio",
    }
)


def format_loc(loc: Iterable[int | str]) -> str:
    """A pydantic error location as a Kubernetes field path: ``spec.resourceGroups[0].flavors[1]``."""
    path = ""
    previous: int | str = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            continue  # pydantic marks errors in a map's key this way; the key itself follows
        elif previous in _MAP_FIELDS or not (part.replace("_", "").isalnum() and part[:1].isalpha()):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
        previous = part
    return path


def _pydantic_problems(err: pydantic.ValidationError) -> list[FieldProblem]:
    problems = []
    for item in err.errors(include_url=False):
        kind, message, value = item["type"], item["msg"], item.get("input")
        if kind == "extra_forbidden":
            message = "unknown field"
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "value_error":
            message = message.removeprefix("Value error, ")
        elif kind == "literal_error":
            message = f"unsupported value {value!r}: {message.replace('Input should be', 'must be')}"
        elif isinstance(value, str | int | float | bool) and not isinstance(value, dict | list):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            message = f"{message} (got {shown})"
        else:
            message = f"{message} (got {_type_name(value)})"
        problems.append(FieldProblem(format_loc(item["loc"]), message))
    return problems


# --- texts and files ----------------------------------------------------------------------


def _decode_documents(text: str, source: str) -> list[tuple[int, Any]]:
    """The documents of a YAML (or JSON) text with their position, N counted from 1."""
    try:
        if source.endswith(".json"):
            value = json.loads(text)
            docs = value if isinstance(value, list) else [value]
            return list(enumerate(docs, start=1))
        return [(n, d) for n, d in enumerate(yaml.load_all(text, Loader=_Loader), start=1) if d is not None]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
        problem = err.problem or str(err)
        raise ParseError(f"{source}:{where} not valid YAML: {problem}") from None
    except yaml.YAMLError as err:
        raise ParseError(f"{source}: not valid YAML: {err}") from None
    except json.JSONDecodeError as err:
        raise ParseError(
            f"{source}: line {err.lineno}, column {err.colno}: not valid JSON: {err.msg}"
        ) from None
    except RecursionError:
        raise ParseError(f"{source}: nested too deeply to read") from None


def _list_items(doc: Any) -> list[tuple[str, Any]]:
    """A ``kind: List`` document (as ``kubectl get -o yaml`` writes) as its items; else the document."""
    if isinstance(doc, Mapping) and doc.get("kind") == "List" and doc.get("apiVersion") == "v1":
        items = doc.get("items")
        if isinstance(items, list):
            return [(f"items[{i}].", item) for i, item in enumerate(items)]
    return [("", doc)]


# A caller's hook for documents that are not API objects (a Kueue Configuration in a
# simulator design): given the raw document and where it is (``file#n``), it returns
# True when it took the document, which is then not parsed as an object.
Take = Callable[[Any, str], bool]


def knows(doc: Any) -> bool:
    """Whether `parse_object` reads this document's kind (a Kueue kind or one of the core kinds)."""
    if not isinstance(doc, Mapping):
        return True  # not a manifest at all: parse_object says why
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return True
    if kind in _KUEUE_KINDS or kind == "Queue" or api_version.rpartition("/")[0] == KUEUE_GROUP:
        return True  # an unknown kind in Kueue's own group is a typo, not another tool's object
    return any(core_kind == kind for _, core_kind in _CORE_KINDS)


def documents(text: str, source: str) -> list[tuple[str, str, Any]]:
    """``(source#n, field prefix, document)`` for every document of a text, List items one by one."""
    return [
        (f"{source}#{n}", prefix, item)
        for n, doc in _decode_documents(text, source)
        for prefix, item in _list_items(doc)
    ]


def load_text(
    text: str, source: str, options: LoadOptions = STRICT, take: Take | None = None
) -> list[KubeObject]:
    """Every object of a multi-document text; one ValidationError with all problems, or all objects."""
    objects: list[KubeObject] = []
    problems: list[FieldProblem] = []
    for n, doc in _decode_documents(text, source):
        for prefix, item in _list_items(doc):
            if take is not None and take(item, f"{source}#{n}"):
                continue
            try:
                objects.append(parse_object(item, f"{source}#{n}", options))
            except ValidationError as err:
                problems.extend(
                    FieldProblem(f"{prefix}{p.path}" if prefix else p.path, p.message, p.obj, p.source)
                    for p in err.problems
                )
    if problems:
        raise ValidationError(problems)
    return objects


def manifest_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files named, and the manifest files under the directories named (sorted, recursive)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MANIFEST_SUFFIXES]
            files.extend(sorted(found))
        else:
            files.append(path)
    return files


def load_paths(
    paths: Iterable[str | Path], options: LoadOptions = STRICT, take: Take | None = None
) -> list[KubeObject]:
    """Every object in the files and directories; all problems of all files in one ValidationError.

    A file that cannot be read or is not YAML/JSON becomes a problem of its own (with an
    empty field path), so one broken file does not hide the problems of the others.
    """
    objects: list[KubeObject] = []
    problems: list[FieldProblem] = []
    for path in manifest_files(paths):
        try:
            objects.extend(load_text(read_text(path), str(path), options, take))
        except ValidationError as err:
            problems.extend(err.problems)
        except ParseError as err:
            problems.append(FieldProblem("", _strip_source(str(err), str(path)), source=str(path)))
    if problems:
        raise ValidationError(problems)
    return objects


def _strip_source(message: str, source: str) -> str:
    return message.removeprefix(f"{source}:").strip()


def read_text(path: Path) -> str:
    """A manifest file's text; ParseError when it is missing, too big or not UTF-8."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ParseError(f"{path}: file is {size} bytes, more than the {MAX_FILE_BYTES} we read")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file or directory") from None
    except IsADirectoryError:
        raise ParseError(f"{path}: is a directory") from None
    except UnicodeDecodeError as err:
        raise ParseError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ParseError(f"{path}: cannot read: {err.strerror}") from None


def to_manifest(obj: KubeObject) -> dict[str, Any]:
    """The object as a v1beta2 (or core) manifest: camelCase, JSON types, nothing empty or unset."""
    return obj.to_wire()


def dump_yaml(objects: Iterable[KubeObject]) -> str:
    """Objects as one multi-document YAML text (for round trips and `pykueue validate -o`)."""
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump_all([to_manifest(o) for o in objects], Dumper=dumper, sort_keys=False)
