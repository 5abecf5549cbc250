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
`pod_template`, ...); `provisioning_controller` feeds it from watched objects and
makes the writes. The ProvisioningRequest kind belongs to the autoscaler's CRD: a
cluster without it keeps working, the check then never becomes Ready.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pykueue.api import semantic
from pykueue.api.admission_check import PROVISIONING_REQUEST_CONTROLLER
from pykueue.reconcilers import jobframework
from pykueue.store.base import Manifest

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


def name_of(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def timestamp(moment: datetime) -> str:
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


def owner_reference(obj: Manifest, api_version: str, kind: str) -> Manifest:
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
            "ownerReferences": [owner_reference(workload, jobframework.WORKLOAD_API_VERSION, "Workload")],
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
            "ownerReferences": [owner_reference(workload, jobframework.WORKLOAD_API_VERSION, "Workload")],
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
    name = name_of(workload)
    latest: dict[str, Manifest] = {}
    owned = list(owned)
    for check, config in configs.items():
        if config is None or not request_needed(workload, config):
            continue
        for request in owned:
            attempt = attempt_of(name_of(request), name, check)
            if attempt is None or not synced_with_config(request, config):
                continue
            best = latest.get(check)
            if best is None or (attempt_of(name_of(best), name, check) or 0) < attempt:
                latest[check] = request
    return latest


# --------------------------------------------------------------- check states


def pod_set_updates(workload: Manifest, request: Manifest, config: Manifest) -> list[Manifest]:
    """What a provisioned request changes in the admitted pods: the annotations that let them
    consume the capacity, and node selectors from the request's class details if the config
    asks for them. Only the first pod set of a merged group is named, as upstream does."""
    by_template = {
        template_name(name_of(request), str(ps.get("name"))): str(ps.get("name"))
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
                CONSUME_ANNOTATION: name_of(request),
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
                    log.info(
                        "%s: no provisioningClassDetails %r for a node selector", name_of(request), detail
                    )
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
    workload_name, check = name_of(workload), str(entry.get("name"))
    attempt = attempt_of(name_of(request), workload_name, check) or 1
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
            wanted.append((check, (attempt_of(name_of(request), name_of(workload), check) or 1) + 1))
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
            merged["lastTransitionTime"] = timestamp(now)
        result.append(merged)
    return result
