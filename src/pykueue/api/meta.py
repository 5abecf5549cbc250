"""The shared vocabulary of every model: the base class, value types and object metadata.

Every model derives from `KubeModel`, which fixes how the API is read and written:

* attributes are snake_case in Python and camelCase on the wire (``nominal_quota`` <->
  ``nominalQuota``); both spellings are accepted when building a model in code;
* unknown fields are refused, with their path, as an API server with a structural
  schema does (``extra='forbid'``), and types are strict: ``count: "3"`` is an error,
  not a silent conversion, because Kubernetes would refuse it too;
* writing a model back (`KubeModel.to_wire`) leaves out what Go's ``omitempty``
  leaves out (None, empty strings, empty lists and maps, and always-present structs
  such as ``status`` when they are empty), so a manifest survives a round trip
  without gaining noise. An optional object is kept even when empty, because
  ``namespaceSelector: {}`` (all namespaces) and an absent selector (none) mean
  different things.

Value types are `typing.Annotated` aliases so that the models read like the Go
structs they mirror: `Quantity` keeps the user's text (``"40000m"`` stays
``"40000m"``) but is checked on the way in and read as exact milli-units with
`milli`; `Time` is a timezone-aware `datetime` written back in RFC 3339; the name
types (`DNSSubdomain`, `DNSLabel`, `QualifiedName`) carry the Kubernetes name
rules so that a bad reference is reported on the field that holds it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from pykueue.api import quantity

# --- name rules (k8s.io/apimachinery/pkg/util/validation) -----------------------------

DNS_LABEL_MAX: Final = 63
DNS_SUBDOMAIN_MAX: Final = 253
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE: Final = re.compile(rf"^{_DNS_LABEL}$")
_DNS_SUBDOMAIN_RE: Final = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME_RE: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def dns_label_errors(value: str) -> list[str]:
    """Why `value` is not an RFC 1123 label (empty list when it is one)."""
    if len(value) > DNS_LABEL_MAX:
        # The pattern is not even tried on an over-long value (it may be megabytes).
        return [f"must be no more than {DNS_LABEL_MAX} characters"]
    errors = []
    if not _DNS_LABEL_RE.match(value):
        errors.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character (e.g. 'my-name')"
        )
    return errors


def dns_subdomain_errors(value: str) -> list[str]:
    """Why `value` is not an RFC 1123 subdomain (empty list when it is one)."""
    if len(value) > DNS_SUBDOMAIN_MAX:
        return [f"must be no more than {DNS_SUBDOMAIN_MAX} characters"]
    errors = []
    if not _DNS_SUBDOMAIN_RE.match(value):
        errors.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
            "or '.', and must start and end with an alphanumeric character (e.g. 'example.com')"
        )
    return errors


def qualified_name_errors(value: str) -> list[str]:
    """Why `value` is not a qualified name such as a label key or a resource name."""
    if value == "":
        return ["name part must be non-empty"]
    prefix, slash, name = value.rpartition("/")
    errors = []
    if slash:
        if prefix == "":
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {msg}" for msg in dns_subdomain_errors(prefix))
    if len(name) > DNS_LABEL_MAX:
        errors.append(f"name part must be no more than {DNS_LABEL_MAX} characters")
    elif not _QUALIFIED_NAME_RE.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')"
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why `value` is not a valid label value (which may be empty)."""
    if value == "":
        return []
    if len(value) > DNS_LABEL_MAX:
        return [f"must be no more than {DNS_LABEL_MAX} characters"]
    errors = []
    if not _QUALIFIED_NAME_RE.match(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character"
        )
    return errors


def shorten(value: object, limit: int = 60) -> str:
    """`repr` of a value for an error message, cut short so a 10 MB string stays readable."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


# Validation context key: when False, DNS name formats are not enforced (see `_dns_checked`).
CHECK_NAMES: Final = "check_names"


def names_checked(info: ValidationInfo | None) -> bool:
    context = info.context if info is not None else None
    return not (isinstance(context, dict) and context.get(CHECK_NAMES) is False)


def _dns_checked(rule: Any) -> Any:
    # Object names and references to them follow RFC 1123 in the API; tests derived from
    # upstream's unit tests (which bypass the API server) use names such as "ClusterQueueA",
    # so a loader may switch this one family of checks off through the validation context.
    def check(value: str, info: ValidationInfo) -> str:
        if not names_checked(info):
            return value
        errors = rule(value)
        if errors:
            raise ValueError(f"{shorten(value)}: " + "; ".join(errors))
        return value

    return AfterValidator(check)


def _checked(rule: Any) -> Any:
    def check(value: str) -> str:
        errors = rule(value)
        if errors:
            raise ValueError(f"{shorten(value)}: " + "; ".join(errors))
        return value

    return AfterValidator(check)


DNSLabel = Annotated[str, _dns_checked(dns_label_errors)]
DNSSubdomain = Annotated[str, _dns_checked(dns_subdomain_errors)]
QualifiedName = Annotated[str, _checked(qualified_name_errors)]
ResourceName = QualifiedName  # corev1.ResourceName is checked as a label key upstream

# --- quantities ---------------------------------------------------------------------


def _quantity_text(value: object) -> object:
    # YAML reads `cpu: 4` as an int and `cpu: 1.5` as a float; Kubernetes accepts both
    # spellings, and we keep the text so that the manifest round-trips unchanged.
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 500m, 2, 1.5Gi)")
    if isinstance(value, int | float):
        return str(value)
    return value


def _check_quantity(value: str) -> str:
    try:
        quantity.parse_exact(value)
    except quantity.QuantityError:
        raise ValueError(f"{shorten(value)} is not a quantity (expected e.g. 500m, 2, 1.5Gi)") from None
    return value


Quantity = Annotated[str, BeforeValidator(_quantity_text), AfterValidator(_check_quantity)]
"""A Kubernetes quantity, kept as written; read it with `milli`."""

ResourceList = dict[ResourceName, Quantity]


def milli(value: str) -> int:
    """The exact value of a (validated) quantity in milli-units: ``milli("1.5") == 1500``."""
    return quantity.parse(value)


def milli_list(resources: dict[str, str]) -> dict[str, int]:
    """A ResourceList read as milli-units per resource."""
    return {name: quantity.parse(text) for name, text in resources.items()}


# --- time ---------------------------------------------------------------------------

ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)


def _to_datetime(value: object) -> object:
    # YAML turns an unquoted timestamp into a datetime already; JSON gives a string.
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValueError(f"{text!r} is not an RFC 3339 time (e.g. 2026-01-01T00:00:00Z)") from None
    if isinstance(value, datetime):
        # A time without a zone is read as UTC, as Kubernetes writes every time in UTC.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    raise ValueError(f"{value!r} is not an RFC 3339 time (e.g. 2026-01-01T00:00:00Z)")


def parse_time(value: object) -> datetime | None:
    """A stored object's RFC 3339 time (a condition's ``lastTransitionTime``), in UTC; None
    when absent or not a time, for readers that skip what they cannot date."""
    if value is None or value == "":
        return None
    try:
        parsed = _to_datetime(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, datetime) else None


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as the Kubernetes API writes times."""
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    # strftime pads years below 1000 inconsistently across platforms; the zero time must
    # come back as 0001-01-01.
    return f"{value.year:04d}{text[text.index('-') :]}Z"


Time = Annotated[datetime, BeforeValidator(_to_datetime), PlainSerializer(format_time, return_type=str)]

# --- integers -------------------------------------------------------------------------

INT32_MAX: Final = 2**31 - 1
Int32 = Annotated[int, Field(ge=-(2**31), le=INT32_MAX)]
NonNegInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
PositiveInt32 = Annotated[int, Field(ge=1, le=INT32_MAX)]
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]

# --- the base class -------------------------------------------------------------------


class KubeModel(BaseModel):
    """Base of every API model: camelCase wire names, strict types, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
    )

    @model_serializer(mode="wrap")
    def _omitempty(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        for name, field in type(self).model_fields.items():
            key = (field.alias or name) if info.by_alias else name
            if key not in data:
                continue
            value = getattr(self, name)
            out = data[key]
            if (
                value is None
                or (isinstance(value, str) and value == "")
                or (isinstance(value, list | dict) and not value)
                # A struct that is always present (default_factory) is left out when empty;
                # an optional one the user set to {} is kept, since {} may mean "all".
                or (field.default_factory is not None and out == {})
            ):
                del data[key]
        return data

    def to_wire(self) -> dict[str, Any]:
        """The object as the API writes it: camelCase keys, JSON types, no empty noise."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


class PassthroughModel(KubeModel):
    """A core Kubernetes type we read only in part: fields we do not model are kept as given.

    PodSpec alone has some fifty fields (volumes, env, probes...) that quota never looks
    at; refusing them would make real manifests unusable, and dropping them would break
    round trips. They are carried through untouched instead.
    """

    model_config = ConfigDict(extra="allow")


# --- metadata -------------------------------------------------------------------------


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    """metav1.ObjectMeta: who the object is; name rules depend on the kind and are checked later."""

    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: Int64 | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: Int64 | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)
    self_link: str = ""


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(KubeModel):
    """metav1.Condition.

    Upstream requires ``reason``, ``message`` and ``lastTransitionTime``; we accept them
    absent because hand-written state (scenario files, tests) often gives only type and
    status, and the engine reads a missing transition time as "now".
    """

    type: str
    status: ConditionStatus
    observed_generation: Int64 | None = None
    last_transition_time: Time | None = None
    reason: str = ""
    message: str = ""


LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: LabelSelectorOperator
    values: list[str] = Field(default_factory=list)


class LabelSelector(KubeModel):
    """metav1.LabelSelector; an empty selector matches everything."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a set of labels is selected (the requirements are ANDed)."""
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True
