"""The ProvisioningRequest admission check's controller: the writes `provisioning` plans.

`ProvisioningController` follows Workloads, AdmissionChecks, ProvisioningRequestConfigs
and ProvisioningRequests; for each Workload with a check of its own it writes the check
states `provisioning.check_state` gives, deletes the requests no check needs any more
and creates the ones they need (their PodTemplates first, then handed over to the
request). The planning, and what each state means, is in `provisioning`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pykueue.engine.config import EngineConfig
from pykueue.errors import AlreadyExists, Conflict, InputError, NotFound, StoreError
from pykueue.reconcilers.provisioning import (
    CLEANUP_GATE,
    CONFIG_KIND,
    CONTROLLER_NAME,
    REQUEST_API_VERSION,
    REQUEST_KIND,
    InconsistentAssignments,
    active_condition,
    apply_entry,
    check_state,
    config_of,
    current_requests,
    is_true,
    name_of,
    owner_reference,
    provisioning_request,
    requests_to_create,
    timestamp,
)
from pykueue.store.base import Key, Manifest, Store, WatchEvent, version_number

log = logging.getLogger(__name__)


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
        wanted["lastTransitionTime"] = timestamp(self.clock())
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
        writes += await self._delete_all(owned, keep={name_of(r) for r in current.values()})
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
            name = name_of(request)
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
                what = f'Error creating PodTemplate "{name_of(template)}": {exc}'
                return writes + await self._report_error(wl, check, what)
        try:
            created = await self.store.create(request)
            writes += 1
            log.info("%s: created ProvisioningRequest %s (attempt %d)", Key.of(wl), name_of(request), attempt)
        except AlreadyExists:
            created = await self.store.get(REQUEST_KIND, namespace, name_of(request))
        except (InputError, StoreError) as exc:
            if isinstance(exc, StoreError) and exc.retryable:
                raise
            what = f'Error creating ProvisioningRequest "{name_of(request)}": {exc}'
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
        owner = owner_reference(request, REQUEST_API_VERSION, REQUEST_KIND)
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
