"""The standalone API's one input boundary: every body, path and query value is checked here.

A route never touches ``request.json()`` or a raw path segment: it asks
`read_body` for its model and `name_of`/`namespace_of` for its path values.
What fails is answered in the API's error shape, ``{"error": ..., "problems":
["field.path: message", ...]}``, with:

    400  the body cannot be read: not JSON, not UTF-8, nested deeper than JSON allows
    413  the body is larger than MAX_REQUEST_BYTES, or one manifest larger than MAX_OBJECT_BYTES
    415  a body that is not ``application/json``
    422  the values do not fit: a field missing or of the wrong type, a name that
         cannot exist, a manifest that breaks an API rule

Limits are Kubernetes' own where it has one: an object stored in etcd may be
at most 1.5 MiB; a request at most 3 MiB of JSON in the API server, here 8 MiB
so that one ``apply`` can carry a list of a thousand Jobs.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic import ValidationError as PydanticError
from starlette.requests import Request

from pykueue.api.manifests import format_loc

MAX_REQUEST_BYTES = 8 * 1024 * 1024
MAX_OBJECT_BYTES = 1_572_864  # 1.5 MiB, etcd's default request limit, which bounds a Kubernetes object
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL = re.compile(DNS_LABEL)
_SUBDOMAIN = re.compile(DNS_SUBDOMAIN)
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")

Namespace = Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=63)]
Name = Annotated[str, StringConstraints(pattern=DNS_SUBDOMAIN, max_length=253)]

M = TypeVar("M", bound=BaseModel)


class InputRefused(Exception):
    """A request refused at the boundary: HTTP ``status``, a sentence, one line per problem."""

    def __init__(self, status: int, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.problems = problems or []


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ManifestFile(_Body):
    name: Annotated[str, StringConstraints(max_length=4096)] = "input"
    text: str


class ApplyRequest(_Body):
    """``POST /api/v1/apply``: files of manifests, applied all at once or not at all."""

    files: Annotated[list[ManifestFile], Field(min_length=1, max_length=10_000)]


class RollbackRequest(_Body):
    """``POST /api/v1/policy/rollback``: the policies as they were at a revision (admins to apply)."""

    revision: Annotated[int, Field(ge=0)]
    apply: bool = False


class ActivationRequest(_Body):
    """``POST /api/v1/stop`` and ``/resume``."""

    kind: Literal["workload", "clusterqueue"]
    name: Name
    namespace: Namespace = "default"


class IdentityRequest(_Body):
    """``POST /api/v1/identities``: a new identity (or a new token for one), admins only."""

    name: Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=63)]
    role: Literal["admin", "tenant"] = "tenant"
    namespaces: Annotated[list[Namespace], Field(max_length=1000)] = []
    priorityClasses: Annotated[list[Name], Field(max_length=1000)] = []
    unixUser: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_-]{0,31}$|^[0-9]{1,10}$")] | None = (
        None
    )


def problems_of(err: PydanticError, prefix: str = "") -> list[str]:
    out = []
    for item in err.errors():
        path = format_loc(item["loc"])
        path = f"{prefix}.{path}" if prefix and path else (prefix or path)
        out.append(f"{path}: {item['msg']}" if path else str(item["msg"]))
    return out


async def read_body(request: Request, model: type[M]) -> M:
    """The request's JSON body as ``model``; InputRefused (400/413/415/422) otherwise."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise InputRefused(
            415, f"the body must be application/json, not {content_type or 'missing its content type'}"
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise InputRefused(413, _too_large(int(declared)))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise InputRefused(413, _too_large(size))
        chunks.append(chunk)
    try:
        value: Any = orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as err:
        raise InputRefused(400, f"the body is not JSON: {err}") from None
    try:
        return model.model_validate(value)
    except PydanticError as err:
        raise InputRefused(422, f"the body does not fit {model.__name__}", problems_of(err, "body")) from None


def _too_large(size: int) -> str:
    return f"the body is {size} bytes or more; at most {MAX_REQUEST_BYTES} are accepted"


def namespace_of(value: str, allow_none: bool = False, where: str = "path") -> str:
    """A namespace from the path (or query); "_" means none (cluster-scoped objects) where allowed."""
    if allow_none and value == "_":
        return ""
    if len(value) > 63 or not _LABEL.match(value):
        raise InputRefused(
            422, f"{value[:64]!r} is not a namespace name", [f"{where}.namespace: must match {DNS_LABEL}"]
        )
    return value


def name_of(value: str) -> str:
    if len(value) > 253 or not _SUBDOMAIN.match(value):
        raise InputRefused(
            422, f"{value[:64]!r} is not an object name", [f"path.name: must match {DNS_SUBDOMAIN}"]
        )
    return value


def kind_of(value: str, known: set[str]) -> str:
    if not _KIND.match(value) or value not in known:
        choices = ", ".join(sorted(known))
        raise InputRefused(404, f"unknown kind {value[:64]!r}", [f"path.kind: one of {choices}"])
    return value


def object_size(manifest: dict[str, Any]) -> int:
    return len(orjson.dumps(manifest))
