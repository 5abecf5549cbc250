"""The ProvisioningRequest admission check (``kueue.x-k8s.io/provisioning-request``), as upstream.

A ClusterQueue names an AdmissionCheck whose ``controllerName`` is this
controller's and whose parameters are a ProvisioningRequestConfig. Once a
Workload holds a quota reservation, this controller asks the cluster autoscaler
for the capacity and reports back through the Workload's ``status.admissionChecks``:

    quota reserved ─▶ PodTemplates ``ppt-<request>-<podset>`` + ProvisioningRequest
                      ``<workload>-<check>-<attempt>`` (owned by the Workload)
    autoscaler writes  Provisioned=True   ─▶ check Ready, podSetUpdates carry the
                                             consume-provisioning-request annotations
                       Failed=True        ─▶ check Retry (backoff), Rejected past the limit
                       BookingExpired     ─▶ as Failed, but only before the workload is admitted
                       CapacityRevoked    ─▶ check Rejected (the workload is deactivated)
                       Accepted, Provisioned=False ─▶ Pending, the autoscaler's message shown
    check back to Pending after the eviction ─▶ the next attempt, ``attempt + 1``

The engine reacts to the states (Retry evicts and requeues, Rejected deactivates,
all Ready admits); this module only turns autoscaler conditions into states. The
planning is pure (`check_state`, `requests_to_create`, `provisioning_request`,
`pod_template`, ...); `ProvisioningController` feeds it from watched objects and
makes the writes. The ProvisioningRequest kind belongs to the autoscaler's CRD: a
cluster without it keeps working, the check then never becomes Ready.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pykueue.api import semantic
from pykueue.api.admission_check import PROVISIONING_REQUEST_CONTROLLER
from pykueue.engine.config import EngineConfig
from pykueue.errors import AlreadyExists, Conflict, InputError, NotFound, StoreError
from pykueue.reconcilers import jobframework
from pykueue.store.base import Key, Manifest, Store, WatchEvent, version_number

log = logging.getLogger(__name__)

CONTROLLER_NAME = PROVISIONING_REQUEST_CONTROLLER
CONFIG_KIND = "ProvisioningRequestConfig"
KUEUE_GROUP = "kueue.x-k8s.io"
REQUEST_KIND = "ProvisioningRequest"
REQUEST_API_VERSION = "autoscaling.x-k8s.io/v1"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# A Workload annotation with this prefix becomes a parameter of its requests (the job's
# annotations are copied to its Workload), overriding the config's value of that name.
PARAMETER_PREFIX = "provreq.kueue.x-k8s.io/"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
TEMPLATE_PREFIX = "ppt"
CHECK_INACTIVE_MESSAGE = "the check is not active"
NO_REQUEST_NEEDED = "the provisioning request is not needed"
CLEANUP_GATE = "CleanupProvisioningRequestsOnEviction"

# Autoscaler condition types.
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"

# Names longer than this get a hash suffix: 253 characters at most, with "-" and 5 hex digits.
_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH


# ------------------------------------------------------------------------ names


def limit_name(full: str) -> str:
    """An object name cut to the API's 253 characters, kept unique by a short hash."""
    if len(full) <= _MAX_PREFIX:
        return full
    digest = hashlib.sha1(full.encode()).hexdigest()[:_HASH_LENGTH]
    return f"{full[:_MAX_PREFIX]}-{digest}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_name(f"{workload}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    return limit_name(f"{TEMPLATE_PREFIX}-{request}-{pod_set}")


def attempt_of(request: str, workload: str, check: str) -> int | None:
    """The attempt number in a request's name, or None if it is not a request of this check."""
    prefix = re.escape(limit_name(f"{workload}-{check}-"))
    match = re.fullmatch(prefix + r"([0-9]+)", request)
    return int(match.group(1)) if match else None


# ------------------------------------------------------------------- conditions


def _condition(obj: Manifest | None, kind: str) -> Manifest | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_true(obj: Manifest | None, kind: str) -> bool:
    cond = _condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def _message(obj: Manifest, kind: str) -> str:
    return str((_condition(obj, kind) or {}).get("message") or "")


def _name(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ the config


@dataclass(frozen=True, slots=True)
class Retry:
    """A config's retryStrategy with upstream's defaults filled in."""

    limit: int = 3
    base_seconds: int = 60
    max_seconds: int = 1800


def retry_strategy(config: Manifest) -> Retry:
    given = (config.get("spec") or {}).get("retryStrategy") or {}
    defaults = Retry()

    def value(name: str, default: int) -> int:
        found = given.get(name)
        return default if found is None else int(found)

    return Retry(
        value("backoffLimitCount", defaults.limit),
        value("backoffBaseSeconds", defaults.base_seconds),
        value("backoffMaxSeconds", defaults.max_seconds),
    )


def backoff_seconds(retry_count: int, strategy: Retry) -> int:
    """Seconds before retry number ``retry_count + 1``: the base doubled per earlier retry, capped."""
    if strategy.base_seconds <= 0:
        return 0
    seconds = strategy.base_seconds
    for _ in range(retry_count):
        if strategy.max_seconds and seconds >= strategy.max_seconds:
            break
        seconds *= 2
    return min(seconds, strategy.max_seconds) if strategy.max_seconds else seconds


def config_reference_error(check: Manifest) -> str | None:
    """Why an AdmissionCheck's parameters do not name a ProvisioningRequestConfig, or None."""
    ref = (check.get("spec") or {}).get("parameters")
    if not ref:
        return "missing parameters reference"
    if not ref.get("name"):
        return "empty name: bad parameters reference"
    if ref.get("apiGroup") != KUEUE_GROUP:
        return f'wrong group "{ref.get("apiGroup")}", expecting "{KUEUE_GROUP}": bad parameters reference'
    if ref.get("kind") != CONFIG_KIND:
        return f'wrong kind "{ref.get("kind")}", expecting "{CONFIG_KIND}": bad parameters reference'
    return None


def config_of(check: Manifest, configs: Mapping[str, Manifest]) -> Manifest | None:
    if config_reference_error(check) is not None:
        return None
    return configs.get(str(check["spec"]["parameters"]["name"]))


def active_condition(check: Manifest, configs: Mapping[str, Manifest], generation: int) -> Manifest:
    """The Active condition this controller wants on one of its AdmissionChecks (time left out)."""
    error = config_reference_error(check)
    if error is None and config_of(check, configs) is None:
        name = check["spec"]["parameters"]["name"]
        error = f'provisioningrequestconfigs.kueue.x-k8s.io "{name}" not found'
    if error is None:
        return {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": "The admission check is active",
            "observedGeneration": generation,
        }
    return {
        "type": "Active",
        "status": "False",
        "reason": "BadParametersRef",
        "message": error,
        "observedGeneration": generation,
    }


# ------------------------------------------------------------------ pod sets


def _uses(pod_spec: Manifest, resources: set[str]) -> bool:
    for container in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        res = container.get("resources") or {}
        if resources.intersection(res.get("requests") or {}) or resources.intersection(
            res.get("limits") or {}
        ):
            return True
    return False


def _pod_spec(pod_set: Manifest) -> Manifest:
    return dict((pod_set.get("template") or {}).get("spec") or {})


class InconsistentAssignments(Exception):
    """The admission names no assignment for a pod set that needs one."""


def _assignments(workload: Manifest) -> dict[str, Manifest]:
    admission = (workload.get("status") or {}).get("admission") or {}
    return {str(a.get("name")): a for a in admission.get("podSetAssignments") or []}


def _count(pod_set: Manifest, assignment: Manifest) -> int:
    count = assignment.get("count")
    return int(pod_set.get("count", 1) if count is None else count)


def request_needed(workload: Manifest, config: Manifest) -> bool:
    """Does some pod set with admitted pods use a managed resource (any, if none are listed)?"""
    managed = set((config.get("spec") or {}).get("managedResources") or [])
    assignments = _assignments(workload)
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        if int(pod_set.get("count", 1)) <= 0 or (managed and not _uses(_pod_spec(pod_set), managed)):
            continue
        assignment = assignments.get(str(pod_set.get("name")))
        if assignment is None:
            raise InconsistentAssignments(f'missing assignment for PodSet "{pod_set.get("name")}"')
        if _count(pod_set, assignment) > 0:
            return True
    return False


@dataclass(frozen=True, slots=True)
class MergedPodSet:
    """One pod set of a ProvisioningRequest: possibly several Workload pod sets folded together."""

    name: str
    pod_set: Manifest
    assignment: Manifest
    count: int


_SCHEDULING_FIELDS = ("resources", "nodeSelector", "tolerations", "affinity", "resourceClaims")


def _requests(containers: list[Manifest] | None) -> list[Any]:
    return [(c.get("resources") or {}).get("requests") or {} for c in containers or []]


def _same_requirements(a: Manifest, b: Manifest) -> bool:
    """Two pod sets ask the scheduler for the same things (IdenticalWorkloadSchedulingRequirements)."""
    sa, sb = _pod_spec(a), _pod_spec(b)
    # Semantic equality, as upstream: absent and empty are the same, quantities compare by value.
    for field_name in ("containers", "initContainers"):
        mine, theirs = _requests(sa.get(field_name)), _requests(sb.get(field_name))
        if len(mine) != len(theirs) or not all(
            semantic.same_resources(x, y) for x, y in zip(mine, theirs, strict=True)
        ):
            return False
    return all(semantic.equal(sa.get(name), sb.get(name)) for name in _SCHEDULING_FIELDS)


def _mergeable(a: Manifest, b: Manifest, policy: str | None) -> bool:
    if policy == "IdenticalPodTemplates":
        return semantic.equal(a.get("template"), b.get("template"))
    if policy == "IdenticalWorkloadSchedulingRequirements":
        return _same_requirements(a, b)
    return False


def merged_pod_sets(workload: Manifest, config: Manifest) -> list[MergedPodSet]:
    """The pod sets a request asks capacity for, merged as the config's podSetMergePolicy says."""
    spec = config.get("spec") or {}
    managed = set(spec.get("managedResources") or [])
    policy = spec.get("podSetMergePolicy")
    assignments = _assignments(workload)
    merged: list[MergedPodSet] = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        if int(pod_set.get("count", 1)) <= 0 or (managed and not _uses(_pod_spec(pod_set), managed)):
            continue
        name = str(pod_set.get("name"))
        assignment = assignments.get(name)
        if assignment is None:
            raise InconsistentAssignments(f'missing assignment for PodSet "{name}"')
        count = _count(pod_set, assignment)
        if count <= 0:
            continue
        for i, earlier in enumerate(merged):
            if _mergeable(earlier.pod_set, pod_set, policy):
                merged[i] = MergedPodSet(
                    earlier.name, earlier.pod_set, earlier.assignment, earlier.count + count
                )
                break
        else:
            merged.append(MergedPodSet(name, pod_set, assignment, count))
    return merged


# ------------------------------------------------------------ what is created


def _owner(obj: Manifest, api_version: str, kind: str) -> Manifest:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name"),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _limits_as_missing_requests(pod_spec: Manifest) -> None:
    # The autoscaler sizes nodes by requests; a container that gives only limits gets them
    # as requests, which is also what the API server defaults for its pods.
    for container in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        res = container.get("resources") or {}
        limits = res.get("limits") or {}
        if not limits:
            continue
        requests = dict(res.get("requests") or {})
        for name, value in limits.items():
            requests.setdefault(name, value)
        container["resources"] = {**res, "requests": requests}


def pod_template(
    workload: Manifest, name: str, merged: MergedPodSet, flavors: Mapping[str, Manifest]
) -> Manifest:
    """The PodTemplate a request points to: the pod set's template with its flavors' node
    labels and tolerations, so the autoscaler provisions nodes the pods will fit."""
    template = copy.deepcopy(merged.pod_set.get("template") or {})
    info = jobframework.PodSetInfo.from_assignment(merged.assignment, flavors, merged.count)
    jobframework.merge_into_template(template, info)
    _limits_as_missing_requests(template.setdefault("spec", {}))
    meta = workload.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": {MANAGED_LABEL: "true"},
            # Owned by the Workload until the request exists, so a failed request leaves no orphan.
            "ownerReferences": [_owner(workload, jobframework.WORKLOAD_API_VERSION, "Workload")],
        },
        "template": template,
    }


def parameters(workload: Manifest, config: Manifest) -> dict[str, str]:
    """The config's parameters, then those the Workload's ``provreq.kueue.x-k8s.io/`` annotations give."""
    result = {str(k): str(v) for k, v in ((config.get("spec") or {}).get("parameters") or {}).items()}
    for key, value in ((workload.get("metadata") or {}).get("annotations") or {}).items():
        if key.startswith(PARAMETER_PREFIX):
            result[key[len(PARAMETER_PREFIX) :]] = str(value)
    return result


def provisioning_request(
    workload: Manifest,
    check: str,
    attempt: int,
    config: Manifest,
    flavors: Mapping[str, Manifest],
) -> tuple[Manifest, list[Manifest]]:
    """One attempt's ProvisioningRequest and the PodTemplates it refers to."""
    meta = workload.get("metadata") or {}
    name = request_name(str(meta.get("name")), check, attempt)
    templates: list[Manifest] = []
    pod_sets: list[Manifest] = []
    for merged in merged_pod_sets(workload, config):
        pt_name = template_name(name, merged.name)
        templates.append(pod_template(workload, pt_name, merged, flavors))
        pod_sets.append({"podTemplateRef": {"name": pt_name}, "count": merged.count})
    spec: Manifest = {
        "provisioningClassName": (config.get("spec") or {}).get("provisioningClassName"),
        "podSets": pod_sets,
    }
    params = parameters(workload, config)
    if params:
        spec["parameters"] = params
    request = {
        "apiVersion": REQUEST_API_VERSION,
        "kind": REQUEST_KIND,
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": {MANAGED_LABEL: "true"},
            "ownerReferences": [_owner(workload, jobframework.WORKLOAD_API_VERSION, "Workload")],
        },
        "spec": spec,
    }
    return request, templates


def synced_with_config(request: Manifest, config: Manifest) -> bool:
    """A request made from the config as it is now (its class and parameters); others are stale."""
    spec, wanted = request.get("spec") or {}, config.get("spec") or {}
    if spec.get("provisioningClassName") != wanted.get("provisioningClassName"):
        return False
    have = spec.get("parameters") or {}
    return all(k in have and str(have[k]) == str(v) for k, v in (wanted.get("parameters") or {}).items())


def current_requests(
    workload: Manifest,
    configs: Mapping[str, Manifest | None],
    owned: Iterable[Manifest],
) -> dict[str, Manifest]:
    """Per check, its latest request that still matches the config (the one to follow)."""
    name = _name(workload)
    latest: dict[str, Manifest] = {}
    owned = list(owned)
    for check, config in configs.items():
        if config is None or not request_needed(workload, config):
            continue
        for request in owned:
            attempt = attempt_of(_name(request), name, check)
            if attempt is None or not synced_with_config(request, config):
                continue
            best = latest.get(check)
            if best is None or (attempt_of(_name(best), name, check) or 0) < attempt:
                latest[check] = request
    return latest


# --------------------------------------------------------------- check states


def pod_set_updates(workload: Manifest, request: Manifest, config: Manifest) -> list[Manifest]:
    """What a provisioned request changes in the admitted pods: the annotations that let them
    consume the capacity, and node selectors from the request's class details if the config
    asks for them. Only the first pod set of a merged group is named, as upstream does."""
    by_template = {
        template_name(_name(request), str(ps.get("name"))): str(ps.get("name"))
        for ps in (workload.get("spec") or {}).get("podSets") or []
    }
    spec = request.get("spec") or {}
    details = (request.get("status") or {}).get("provisioningClassDetails") or {}
    wanted = ((config.get("spec") or {}).get("podSetUpdates") or {}).get("nodeSelector")
    config_updates = (config.get("spec") or {}).get("podSetUpdates")
    updates = []
    for ps in spec.get("podSets") or []:
        update: Manifest = {
            "name": by_template.get(str((ps.get("podTemplateRef") or {}).get("name")), ""),
            "annotations": {
                CONSUME_ANNOTATION: _name(request),
                CLASS_ANNOTATION: str(spec.get("provisioningClassName") or ""),
            },
        }
        if config_updates is not None:
            selector = {}
            for item in wanted or []:
                detail = item.get("valueFromProvisioningClassDetail")
                if detail in details:
                    selector[str(item.get("key"))] = str(details[detail])
                else:
                    log.info("%s: no provisioningClassDetails %r for a node selector", _name(request), detail)
            if selector:
                update["nodeSelector"] = selector
        updates.append(update)
    return updates


def _set(entry: Manifest, state: str | None = None, message: str | None = None) -> bool:
    changed = False
    if state is not None and entry.get("state") != state:
        entry["state"] = state
        changed = True
    if message is not None and (entry.get("message") or "") != message:
        entry["message"] = message
        changed = True
    return changed


def _retry_or_reject(
    entry: Manifest, request: Manifest, attempt: int, cause: str, words: str, strategy: Retry
) -> None:
    """A failed (or expired) attempt: Retry with a backoff while attempts remain, else Rejected."""
    message = _message(request, cause)
    if attempt <= strategy.limit:
        _set(entry, message=f"{words}: {message}")
        # An attempt older than the retries already made must not trigger another one.
        if attempt > int(entry.get("retryCount") or 0):
            _set(entry, state="Retry")
            entry["requeueAfterSeconds"] = backoff_seconds(int(entry.get("retryCount") or 0), strategy)
    else:
        _set(entry, state="Rejected", message=message)


def check_state(
    entry: Manifest,
    workload: Manifest,
    config: Manifest | None,
    request: Manifest | None,
) -> Manifest:
    """The next ``status.admissionChecks`` entry of one check, from the autoscaler's conditions.

    Returns a new dict (the input is left alone); compare it with the input to know
    whether to write.
    """
    new = copy.deepcopy(dict(entry))
    if config is None:
        _set(new, state="Pending", message=CHECK_INACTIVE_MESSAGE)
        return new
    if not request_needed(workload, config):
        if _set(new, state="Ready"):
            new["message"] = NO_REQUEST_NEEDED
            new.pop("podSetUpdates", None)
        return new
    if request is None:
        return new
    workload_name, check = _name(workload), str(entry.get("name"))
    attempt = attempt_of(_name(request), workload_name, check) or 1
    strategy = retry_strategy(config)
    admitted = is_true(workload, "Admitted")
    if is_true(request, FAILED):
        _retry_or_reject(new, request, attempt, FAILED, "Retrying after failure", strategy)
    elif is_true(request, CAPACITY_REVOKED):
        finished = is_true(workload, "Finished")
        if (workload.get("spec") or {}).get("active", True) is not False and not finished:
            # Deactivating the workload stops its pods, which would otherwise wait for ever
            # for nodes the autoscaler took away.
            _set(new, state="Rejected", message=_message(request, CAPACITY_REVOKED))
    elif is_true(request, BOOKING_EXPIRED):
        if not admitted:
            _retry_or_reject(
                new, request, attempt, BOOKING_EXPIRED, "Retrying after booking expired", strategy
            )
    elif is_true(request, PROVISIONED):
        if _set(new, state="Ready"):
            updates = pod_set_updates(workload, request, config)
            if updates:
                new["podSetUpdates"] = updates
            _set(new, message=_message(request, PROVISIONED))
    elif is_true(request, ACCEPTED):
        if _condition(request, PROVISIONED) is not None:
            # The autoscaler's progress (an ETA) shows up in the workload's status.
            _set(new, state="Pending", message=_message(request, PROVISIONED))
    else:
        _set(new, state="Pending", message="")
    return new


def requests_to_create(
    workload: Manifest,
    entries: Mapping[str, Manifest],
    configs: Mapping[str, Manifest | None],
    current: Mapping[str, Manifest],
) -> list[tuple[str, int]]:
    """The (check, attempt) pairs that need a new request now."""
    wanted: list[tuple[str, int]] = []
    admitted = is_true(workload, "Admitted")
    for check in sorted(configs):
        config = configs[check]
        if config is None or not request_needed(workload, config):
            continue
        entry = entries.get(check)
        if entry is not None and entry.get("state") == "Ready":
            continue
        # With the old requests cleaned up on eviction, the retry count names the next attempt.
        attempt = int((entry or {}).get("retryCount") or 0) + 1
        request = current.get(check)
        if request is None:
            wanted.append((check, attempt))
            continue
        ended = is_true(request, FAILED) or (is_true(request, BOOKING_EXPIRED) and not admitted)
        # A check in Retry or Rejected gets no new request: the eviction comes first.
        if ended and entry is not None and entry.get("state") == "Pending":
            wanted.append((check, (attempt_of(_name(request), _name(workload), check) or 1) + 1))
    return wanted


def apply_entry(entries: list[Manifest], new: Manifest, now: datetime) -> list[Manifest]:
    """``status.admissionChecks`` with ``new`` in place of its namesake (the transition time
    moves only when the state does)."""
    result = []
    for entry in entries:
        if entry.get("name") != new.get("name"):
            result.append(entry)
            continue
        merged = dict(new)
        if entry.get("state") != new.get("state"):
            merged["lastTransitionTime"] = _time(now)
        result.append(merged)
    return result


# ------------------------------------------------------------------ controller


def _owner_workload(obj: Manifest) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Workload" and ref.get("controller"):
            return str(ref.get("name"))
    return None


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class ProvisioningController:
    """Keeps the ProvisioningRequests of every Workload that has a provisioning check in step."""

    store: Store
    config: EngineConfig = field(default_factory=EngineConfig)
    # ResourceFlavor manifests by name (the admission cache), for the PodTemplates' node labels.
    flavors: Callable[[], Mapping[str, Manifest]] = dict
    clock: Callable[[], datetime] = _utc_now
    # False when the server has no ProvisioningRequest kind (the autoscaler's CRD).
    requests_served: bool = True
    configs_served: bool = True
    workloads: dict[Key, Manifest] = field(default_factory=dict)
    checks: dict[str, Manifest] = field(default_factory=dict)
    configs: dict[str, Manifest] = field(default_factory=dict)
    requests: dict[Key, Manifest] = field(default_factory=dict)
    dirty: set[Key] = field(default_factory=set)
    dirty_checks: set[str] = field(default_factory=set)
    rescan: bool = True

    def kinds(self) -> list[str]:
        kinds = []
        if self.configs_served:
            kinds.append(CONFIG_KIND)
        if self.requests_served:
            kinds.append(REQUEST_KIND)
        return kinds

    async def sync(self) -> dict[str, str]:
        """List the kinds this controller alone follows; find out whether the server has them."""
        versions: dict[str, str] = {}
        for kind in (CONFIG_KIND, REQUEST_KIND):
            try:
                items, versions[kind] = await self.store.list(kind)
            except (NotFound, StoreError) as exc:
                if not isinstance(exc, NotFound) and exc.retryable:
                    raise
                # One line, once: the check stays Pending on such a cluster, nothing breaks.
                log.warning(
                    "%s is not served (%s): ProvisioningRequest admission checks stay Pending", kind, exc
                )
                if kind == REQUEST_KIND:
                    self.requests_served = False
                else:
                    self.configs_served = False
                continue
            for obj in items:
                self._put(obj)
        return versions

    # ----------------------------------------------------------------- events

    def handle(self, event: WatchEvent) -> None:
        obj = event.object
        kind = str(obj.get("kind", ""))
        if kind not in ("Workload", "AdmissionCheck", CONFIG_KIND, REQUEST_KIND):
            return
        if event.type == "DELETED":
            self._drop(obj)
        else:
            self._put(obj)

    def _put(self, obj: Manifest) -> None:
        key = Key.of(obj)
        if key.kind == "Workload":
            previous = self.workloads.get(key)
            if previous is not None and version_number(obj) < version_number(previous):
                return
            self.workloads[key] = obj
            self.dirty.add(key)
        elif key.kind == "AdmissionCheck":
            self.checks[key.name] = obj
            self.dirty_checks.add(key.name)
            self._touch_users_of(key.name)
        elif key.kind == CONFIG_KIND:
            self.configs[key.name] = obj
            self._touch_config(key.name)
        elif key.kind == REQUEST_KIND:
            self.requests[key] = obj
            self._touch_owner(obj)

    def _drop(self, obj: Manifest) -> None:
        key = Key.of(obj)
        if key.kind == "Workload":
            self.workloads.pop(key, None)
            self.dirty.discard(key)
        elif key.kind == "AdmissionCheck":
            self.checks.pop(key.name, None)
            self._touch_users_of(key.name)
        elif key.kind == CONFIG_KIND:
            self.configs.pop(key.name, None)
            self._touch_config(key.name)
        elif key.kind == REQUEST_KIND:
            self.requests.pop(key, None)
            self._touch_owner(obj)

    def _touch_owner(self, request: Manifest) -> None:
        owner = _owner_workload(request)
        if owner is not None:
            self.dirty.add(Key("Workload", (request.get("metadata") or {}).get("namespace") or "", owner))

    def _touch_users_of(self, check: str) -> None:
        for key, wl in self.workloads.items():
            if any(e.get("name") == check for e in (wl.get("status") or {}).get("admissionChecks") or []):
                self.dirty.add(key)

    def _touch_config(self, name: str) -> None:
        for check_name, check in self.checks.items():
            ref = (check.get("spec") or {}).get("parameters") or {}
            if ref.get("name") == name:
                self.dirty_checks.add(check_name)
                self._touch_users_of(check_name)

    def _mine(self, check: str) -> bool:
        obj = self.checks.get(check)
        return obj is not None and (obj.get("spec") or {}).get("controllerName") == CONTROLLER_NAME

    # -------------------------------------------------------------- reconcile

    async def reconcile(self) -> int:
        """Active conditions of our AdmissionChecks, then every dirty Workload; writes made."""
        if self.rescan:
            self.rescan = False
            self.dirty.update(self.workloads)
            self.dirty_checks.update(self.checks)
        writes = 0
        checks, self.dirty_checks = self.dirty_checks, set()
        for name in sorted(checks):
            writes += await self._guard(self._reconcile_check(name), name)
        dirty, self.dirty = self.dirty, set()
        for key in sorted(dirty, key=str):
            writes += await self._guard(self._reconcile_workload(key), str(key))
        return writes

    async def _guard(self, work: Awaitable[int], what: str) -> int:
        try:
            return await work
        except (Conflict, NotFound):
            return 0  # the watch brings the fresh object, which marks it dirty again
        except (InconsistentAssignments, InputError) as exc:
            log.warning("%s: %s", what, exc)
            return 0
        except StoreError as exc:
            log.warning("%s: %s", what, exc)
            if exc.retryable:
                self.rescan = True
            return 0

    async def _reconcile_check(self, name: str) -> int:
        check = self.checks.get(name)
        if check is None or not self._mine(name):
            return 0
        generation = int((check.get("metadata") or {}).get("generation") or 0)
        wanted = active_condition(check, self.configs, generation)
        conditions = list((check.get("status") or {}).get("conditions") or [])
        current = next((c for c in conditions if c.get("type") == "Active"), None)
        if current is not None and current.get("status") == wanted["status"]:
            return 0
        wanted["lastTransitionTime"] = _time(self.clock())
        updated = copy.deepcopy(check)
        updated.setdefault("status", {})["conditions"] = [
            *(c for c in conditions if c.get("type") != "Active"),
            wanted,
        ]
        written = await self.store.update_status(updated)
        self.checks[name] = written
        log.info("admission check %s: Active=%s (%s)", name, wanted["status"], wanted["message"])
        return 1

    def _owned(self, key: Key) -> list[Manifest]:
        return [
            r
            for k, r in sorted(self.requests.items(), key=lambda kv: str(kv[0]))
            if k.namespace == key.namespace and _owner_workload(r) == key.name
        ]

    async def _reconcile_workload(self, key: Key) -> int:
        wl = self.workloads.get(key)
        if wl is None:
            return 0
        finished, evicted = is_true(wl, "Finished"), is_true(wl, "Evicted")
        reserved = bool((wl.get("status") or {}).get("admission"))
        if not reserved and not finished and not evicted:
            return 0
        owned = self._owned(key)
        if finished or (evicted and self.config.gate(CLEANUP_GATE)):
            return await self._delete_all(owned, keep=set())
        if evicted:
            return 0
        entries = {
            str(e.get("name")): e
            for e in (wl.get("status") or {}).get("admissionChecks") or []
            if self._mine(str(e.get("name")))
        }
        configs = {name: config_of(self.checks[name], self.configs) for name in entries}
        current = current_requests(wl, configs, owned)
        writes = 0
        # 1. The check states the requests say.
        new_entries = {
            name: check_state(entry, wl, configs[name], current.get(name)) for name, entry in entries.items()
        }
        if new_entries != entries:
            now = self.clock()
            status_checks = list((wl.get("status") or {}).get("admissionChecks") or [])
            for new in new_entries.values():
                status_checks = apply_entry(status_checks, new, now)
            wl = await self._write_checks(wl, status_checks)
            writes += 1
        # 2. Requests of older attempts, of other configs, of checks gone: deleted.
        writes += await self._delete_all(owned, keep={_name(r) for r in current.values()})
        # 3. The requests the checks need now.
        if self.requests_served:
            for check, attempt in requests_to_create(wl, new_entries, configs, current):
                config = configs[check]
                assert config is not None  # requests_to_create skips checks without one
                writes += await self._create(wl, check, attempt, config)
        return writes

    async def _write_checks(self, wl: Manifest, status_checks: list[Manifest]) -> Manifest:
        updated = copy.deepcopy(wl)
        updated.setdefault("status", {})["admissionChecks"] = status_checks
        written = await self.store.update_status(updated)
        self.workloads[Key.of(written)] = written
        for entry in status_checks:
            if self._mine(str(entry.get("name"))):
                log.info(
                    "%s: admission check %s %s %s",
                    Key.of(wl),
                    entry.get("name"),
                    entry.get("state"),
                    entry.get("message") or "",
                )
        return written

    async def _delete_all(self, owned: list[Manifest], keep: set[str]) -> int:
        writes = 0
        for request in owned:
            name = _name(request)
            if name in keep:
                continue
            key = Key.of(request)
            with contextlib.suppress(NotFound):
                await self.store.delete(REQUEST_KIND, key.namespace, name)
            self.requests.pop(key, None)
            log.info("deleted ProvisioningRequest %s", key)
            writes += 1
        return writes

    async def _create(self, wl: Manifest, check: str, attempt: int, config: Manifest) -> int:
        request, templates = provisioning_request(wl, check, attempt, config, self.flavors())
        writes = 0
        namespace = str(request["metadata"]["namespace"])
        for template in templates:
            try:
                await self.store.create(template)
                writes += 1
            except AlreadyExists:
                pass  # made by an earlier pass whose request failed: used as it is
            except (InputError, StoreError) as exc:
                if isinstance(exc, StoreError) and exc.retryable:
                    raise
                what = f'Error creating PodTemplate "{_name(template)}": {exc}'
                return writes + await self._report_error(wl, check, what)
        try:
            created = await self.store.create(request)
            writes += 1
            log.info("%s: created ProvisioningRequest %s (attempt %d)", Key.of(wl), _name(request), attempt)
        except AlreadyExists:
            created = await self.store.get(REQUEST_KIND, namespace, _name(request))
        except (InputError, StoreError) as exc:
            if isinstance(exc, StoreError) and exc.retryable:
                raise
            what = f'Error creating ProvisioningRequest "{_name(request)}": {exc}'
            return writes + await self._report_error(wl, check, what)
        self.requests[Key.of(created)] = created
        writes += await self._hand_over(wl, created)
        return writes

    async def _report_error(self, wl: Manifest, check: str, message: str) -> int:
        """A create the API server refused: said in the check's message (its state stays)."""
        log.warning("%s: %s", Key.of(wl), message)
        entries = copy.deepcopy(list((wl.get("status") or {}).get("admissionChecks") or []))
        changed = False
        for entry in entries:
            if entry.get("name") == check and entry.get("message") != message[:32768]:
                entry.update(message=message[:32768])
                changed = True
        if not changed:
            return 0
        await self._write_checks(wl, entries)
        return 1

    async def _hand_over(self, wl: Manifest, request: Manifest) -> int:
        """The PodTemplates pass from the Workload to the request they belong to (and go with it)."""
        writes = 0
        wl_uid = (wl.get("metadata") or {}).get("uid")
        owner = _owner(request, REQUEST_API_VERSION, REQUEST_KIND)
        namespace = str((request.get("metadata") or {}).get("namespace") or "")
        for ps in (request.get("spec") or {}).get("podSets") or []:
            name = str((ps.get("podTemplateRef") or {}).get("name") or "")
            try:
                template = await self.store.get("PodTemplate", namespace, name)
            except NotFound:
                continue
            refs = list((template.get("metadata") or {}).get("ownerReferences") or [])
            kept = [r for r in refs if not (r.get("controller") and r.get("uid") == wl_uid)]
            if any(r.get("controller") and r.get("uid") == owner["uid"] for r in kept):
                if kept == refs:
                    continue
            else:
                kept = [r for r in kept if not r.get("controller")] + [owner]
            updated = copy.deepcopy(template)
            updated["metadata"]["ownerReferences"] = kept
            await self.store.update(updated)
            writes += 1
        return writes
