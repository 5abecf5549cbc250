"""The local executor: an unsuspended Job's pods run as process groups on this machine.

It plays kubelet and the Job controller for one node. It follows Jobs in the
store and, for each one the job adapter has unsuspended:

* starts its pods (``parallelism`` at a time, the admitted count) until
  ``completions`` (default: ``parallelism``) indexes have exited 0. A pod is
  ``command + args`` of the first container in a new session, fenced in as
  `isolation` describes: its owner's user, its own folder and cgroup, a clean
  environment with the container's ``env``; the image is ignored, and the
  Job's status says so;
* pins GPUs: a pod asking ``nvidia.com/gpu: N`` gets N devices of the admitted
  flavor's pool in ``CUDA_VISIBLE_DEVICES`` (empty for the others), from a
  `node.DeviceTable` that frees a device only when every process of the pod
  (its cgroup, or its group and session) is gone; a pod waits while its
  devices are still held;
* captures each pod's output in ``logs/<namespace>/<job>/<job uid>/<index>.log``
  (a new job of an old name starts with no logs; deleting a job deletes them);
* fails the Job at once (reason ``PodStartFailed``, the cause in its message)
  when a pod cannot be set up or fenced in (its log, folder, cgroup, user or
  working folder): such a pod never ran, and a retry would meet the same
  cause, so the Job's quota is given back instead;
* counts exits: 0 completes the index; anything else is a failure, retried
  after a back-off (10 s, doubled per failure, at most 6 min, as the Job
  controller does) until the Job's ``backoffLimit`` (default 6) is exceeded,
  then the Job fails;
* stops a suspended Job: SIGTERM to every process of each pod, the pod's
  ``terminationGracePeriodSeconds`` (default 30) to finish, then SIGKILL. Such
  an exit is not a failure; the next start sees ``PYKUEUE_PREEMPTED=1``;
* runs a distributed job as one gang: a Job whose ``parallelism`` N > 1 equals
  its ``completions`` (the shape of a torchrun job) starts its N pods together,
  only once the devices of all N are free, with ``MASTER_ADDR=127.0.0.1``, a
  fresh ``MASTER_PORT``, ``WORLD_SIZE=N``, ``RANK`` and ``LOCAL_RANK`` (its
  index), ``LOCAL_WORLD_SIZE=N``, ``NODE_RANK=0``; when one of them fails the
  others are stopped and the gang starts again whole after the back-off (one
  failure counted). The annotation ``pykueue.io/gang: "false"`` opts out.
* runs a JobSet the same way, as the JobSet controller and the Job controller
  together: every pod of every replicated job is one rank of one gang
  (`local_jobset` numbers them and holds its success and failure policies);
  a failed pod restarts the whole JobSet until ``failurePolicy.maxRestarts``.

Crash safety: every pod runs in a cgroup under the store's subtree and carries
``PYKUEUE_STORE=<store file>`` in its environment. On start, before anything
runs, the executor kills every process of that subtree and every process that
carries the marker (left by a server that died) and waits until they are gone;
their Jobs, still admitted, start their unfinished indexes again with
``PYKUEUE_PREEMPTED=1``. So no pod ever runs twice at once, at the price of
restarting work that was in flight (at-least-once execution).

The Job's status is the executor's alone, so it writes it without a
resourceVersion; everything it counts (completed indexes, failures,
preemptions) lives there and survives a restart.

This module is the loop and the decisions that need its state (which pods to start,
when, with which devices). The rest lives beside it: `job_spec` reads what a Job or
JobSet asks for, `job_status` what it counts and the status made of that, `pod_exits` what a
pod's exit means, `gpus` which devices a pod takes, `pod_processes` a pod's processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pykueue.errors import NotFound
from pykueue.reconcilers import jobframework
from pykueue.standalone.node import gpus, local_jobset, pod_exits, probes
from pykueue.standalone.node.accounts import AccountError, RunAs
from pykueue.standalone.node.cgroups import Limits
from pykueue.standalone.node.isolation import Isolation, OwnerChanged, bounded, unreachable_ancestor
from pykueue.standalone.node.job_spec import (
    PodSlot,
    gang_size,
    is_gang,
    job_counts,
    ours,
    pod_slot,
    suspended,
)
from pykueue.standalone.node.job_status import JobRun, counts_of, now_text, status_of
from pykueue.standalone.node.launcher_client import FenceError, LauncherClient, LaunchError
from pykueue.standalone.node.machine import GPU_RESOURCE, DeviceTable, Node
from pykueue.standalone.node.pod_exits import GANG_RETRY
from pykueue.standalone.node.pod_processes import Pod, kill_leftovers, pod_variables
from pykueue.store.base import Key, Manifest, Store, WatchEvent, version_number

log = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 30
POD_START_FAILED = "PodStartFailed"  # the reason of a Job whose pod could not be set up or fenced in
REAP_SECONDS = 10.0  # how long a pod's leftovers may take to die after SIGKILL before we stop waiting
RUNNABLE_KINDS = ("Job", local_jobset.KIND)  # the kinds whose pods this executor runs


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before a failed pod starts again: ``base`` doubled per failure, at most ``most``."""

    base: float = 10.0
    most: float = 360.0

    def delay(self, failures: int) -> float:
        if failures <= 0 or self.base <= 0:
            return 0.0
        return float(min(self.most, self.base * 2 ** min(failures - 1, 30)))


class LocalExecutor:
    """Runs unsuspended Jobs as local processes."""

    def __init__(
        self,
        store: Store,
        node: Node,
        data_dir: Path,
        marker: str,
        isolation: Isolation,
        record: Callable[[str, str], None] = lambda message, namespace: None,
        backoff: Backoff | None = None,
    ) -> None:
        self.store = store
        self.devices = DeviceTable(node)
        self.data_dir = data_dir
        self.marker = marker
        self.isolation = isolation
        self.record = record
        self.backoff = backoff or Backoff()
        self.jobs: dict[Key, Manifest] = {}
        self.runs: dict[Key, JobRun] = {}
        self.pods: dict[Key, dict[int, Pod]] = {}
        self._dirty: set[Key] = set()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._serial = 0
        self.launcher = LauncherClient()
        self.starts = 0  # pods started since this executor began (for tests and metrics)
        # (namespace, name) of the jobs whose processes `kill_leftovers` found: interrupted even
        # when the earlier server died before it recorded their pods as active.
        self.interrupted: set[tuple[str, str]] = set()

    # ------------------------------------------------------------ start up

    def kill_leftovers(self, timeout: float = 15.0) -> tuple[int, int]:
        """Kill every process left by an earlier server on this store; wait until they are gone.

        Returns (how many there were, how many would not die): a server killed with -9 leaves
        its pods running, and the user should hear that they were stopped.
        """
        present, stuck, jobs = kill_leftovers(self.marker, self.isolation.cgroups, timeout)
        self.interrupted.update(jobs)
        return present, stuck

    async def sync(self) -> str:
        items, versions = [], []
        for kind in RUNNABLE_KINDS:
            listed, listed_at = await self.store.list(kind)
            items.extend(listed)
            versions.append(listed_at)
        # Both watches start at the earliest list: a change between the lists is seen twice
        # (the older copy is dropped by `handle`), never missed.
        version = versions[0]
        for job in items:
            if not ours(job):
                continue
            key = Key.of(job)
            self.jobs[key] = job
            if key in self.runs:
                continue  # a restarted loop: this executor's own counts and pods are current
            run = JobRun.from_status(job.get("status") or {})
            self.runs[key] = run
            active = int(counts_of(job.get("status") or {}).get("active", 0)) > 0
            ran = (key.namespace, key.name) in self.interrupted
            if (active or ran) and run.outcome is None:
                # Its pods died with the previous server (kill_leftovers made sure), whether or not
                # that server lived to record them: a pod started just before a crash counts too.
                run.interruptions += 1
                await self._write_status(key)
            self._dirty.add(key)
        return version

    # ---------------------------------------------------------------- loop

    async def run(self, stop: asyncio.Event, tick_seconds: float = 0.2) -> None:
        version = await self.sync()
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        follower = asyncio.create_task(self._follow(version, events))
        try:
            while not stop.is_set():
                await self.reconcile_dirty()
                getter = asyncio.ensure_future(events.get())
                waker = asyncio.ensure_future(self._wake.wait())
                done, pending = await asyncio.wait(
                    {getter, waker}, timeout=tick_seconds, return_when="FIRST_COMPLETED"
                )
                for task in pending:
                    task.cancel()
                self._wake.clear()
                if getter in done:
                    self.handle(getter.result())
                while not events.empty():
                    self.handle(events.get_nowait())
                if not done:
                    self._dirty.update(key for key in self.jobs if self._wants_pods(key))
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
            await self.shutdown()

    async def _follow(self, version: str, events: asyncio.Queue[WatchEvent]) -> None:
        async def follow(kind: str) -> None:
            async for event in self.store.watch(kind, version):
                await events.put(event)

        await asyncio.gather(*(follow(kind) for kind in RUNNABLE_KINDS))

    def handle(self, event: WatchEvent) -> None:
        key = Key.of(event.object)
        if event.type == "DELETED":
            self.jobs.pop(key, None)
            self._forget_files(key, event.object)
        elif not ours(event.object):
            return  # another controller's job (MultiKueue runs it on a worker): never run here
        else:
            current = self.jobs.get(key)
            if current is not None and version_number(current) > version_number(event.object):
                return
            self.jobs[key] = event.object
            self.runs.setdefault(key, JobRun.from_status(event.object.get("status") or {}))
        self._dirty.add(key)

    def _forget_files(self, key: Key, job: Manifest) -> None:
        """A deleted job's logs and folder go with it, as a pod's do in Kubernetes."""
        shutil.rmtree(self._log_folder(key, job), ignore_errors=True)
        self.isolation.remove_job_folder(key, job)

    def _log_folder(self, key: Key, job: Manifest) -> Path:
        return log_folder(self.data_dir, key.namespace, key.name, str(job["metadata"].get("uid") or ""))

    async def shutdown(self) -> None:
        """Leave pods running: a restarted server kills and restarts them (see the module doc)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def stop_all(self, timeout: float) -> None:
        """Stop every pod (SIGTERM, then SIGKILL after its grace, capped at ``timeout``)."""
        pods = [pod for pods in self.pods.values() for pod in pods.values()]
        for pod in pods:
            pod.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for pod in pods:
            grace = max(0.0, min(pod.grace, deadline - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pod.process.wait(), timeout=grace)
            pod.kill_all()
        for pod in pods:
            await self._reap(pod)
        await self.launcher.close()

    def _wants_pods(self, key: Key) -> bool:
        job = self.jobs.get(key)
        run = self.runs.get(key)
        return job is not None and run is not None and run.outcome is None and not suspended(job)

    # ----------------------------------------------------------- reconcile

    async def reconcile_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=str):
            await self.reconcile(key)

    async def reconcile(self, key: Key) -> None:
        job = self.jobs.get(key)
        pods = self.pods.get(key, {})
        if job is None:
            for pod in pods.values():
                self._stop(pod)
            self.runs.pop(key, None)
            return
        run = self.runs.setdefault(key, JobRun.from_status(job.get("status") or {}))
        if run.outcome is not None:
            for pod in pods.values():
                self._stop(pod)
            return
        if suspended(job):
            run.retry_at.clear()  # a preemption ends the back-off: the next admission starts afresh
            live = [pod for pod in pods.values() if not pod.stopping]
            if live:
                run.preemptions += 1
                reason = _eviction_reason(await self._workload(key, job))
                run.start_time = ""  # as the job controller: a suspended Job has no startTime
                self.record(
                    f"{key.namespace}/{key.name}: stopping {len(live)} pod(s): {reason}", key.namespace
                )
                for pod in live:
                    self._stop(pod)
                await self._write_status(key)
            elif run.start_time or (job.get("status") or {}).get("startTime"):
                run.start_time = ""  # as the job controller: a suspended Job has no startTime
                await self._write_status(key)
            return
        await self._start_missing(key, job, run)

    async def _start_missing(self, key: Key, job: Manifest, run: JobRun) -> None:
        spec = job.get("spec") or {}
        parallelism, completions = job_counts(spec)
        pods = self.pods.setdefault(key, {})
        if any(pod.stopping for pod in pods.values()):
            return  # a stop is still in progress: wait for its pods to be gone
        if is_gang(job):
            await self._start_gang(key, job, run)
            return
        running = set(pods)
        todo = [i for i in range(completions) if i not in run.completed and i not in running]
        now = time.monotonic()
        started = False
        for index in todo[: max(0, parallelism - len(running))]:
            due = run.retry_at.get(index, 0.0)
            if due > now:
                self._wake_at(due)
                message = (
                    f"pod {index} starts again in {due - now:.0f} s (back-off after {run.failed} failure(s))"
                )
                if not run.waiting.startswith(f"pod {index} starts again"):
                    run.waiting = message
                    await self._write_status(key)
                continue
            run.retry_at.pop(index, None)
            if not await self._start(key, job, run, index):
                break
            started = True
        if started:
            await self._write_status(key)

    async def _start_gang(self, key: Key, job: Manifest, run: JobRun) -> None:
        """Start every unfinished index together, or none: a distributed job needs all its ranks."""
        if self.pods.get(key):
            return  # running (or its last members are still finishing)
        todo = [i for i in range(gang_size(job)) if i not in run.completed]
        if not todo:
            return
        due = run.retry_at.get(GANG_RETRY, 0.0)
        now = time.monotonic()
        if due > now:
            self._wake_at(due)
            message = f"the gang starts again in {due - now:.0f} s (back-off after {run.failed} failure(s))"
            if not run.waiting.startswith("the gang starts again"):
                run.waiting = message
                await self._write_status(key)
            return
        needs, flavor_of = await self._gang_gpus(key, job, todo)
        short = {flavor: n for flavor, n in needs.items() if self.devices.free(flavor or None) < n}
        if short:
            wanted = sum(needs.values())
            message = f"waiting for {wanted} free GPU(s) to start all {len(todo)} pods of the gang together"
            if run.waiting != message:
                run.waiting = message
                await self._write_status(key)
            return
        run.retry_at.pop(GANG_RETRY, None)
        run.gang_port = _free_port()
        for index in todo:
            together = needs.get(flavor_of.get(index, ""), 0)
            if not await self._start(key, job, run, index, together=together):
                # Could not start one rank (its user, its command): stop the ranks already started.
                for pod in self.pods.get(key, {}).values():
                    self._stop(pod)
                break
        await self._write_status(key)

    async def _gang_gpus(
        self, key: Key, job: Manifest, todo: list[int]
    ) -> tuple[dict[str, int], dict[int, str]]:
        """GPUs the gang's pods ``todo`` need at once, by the flavor their pod set was admitted
        with ("" when it names none), and each GPU pod's flavor."""
        slots = [pod_slot(job, index) for index in todo]
        if not any(gpus.gpu_count(slot.container) for slot in slots):
            return {}, {}
        return gpus.gang_needs(slots, await self._workload(key, job))

    def _wake_at(self, due: float) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(max(0.0, due - time.monotonic()) + 0.01, self._wake.set)

    async def _start(self, key: Key, job: Manifest, run: JobRun, index: int, together: int = 0) -> bool:
        """Start pod ``index``; ``together``: the GPUs its whole gang takes of its flavor at once."""
        slot = pod_slot(job, index)
        container = slot.container
        argv = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
        if not argv:
            return await self._fail_job(
                key,
                run,
                "NoCommand",
                "the container has no command: standalone mode cannot run an image's entrypoint",
            )
        try:
            owner = self.isolation.run_as(job)
        except OwnerChanged as exc:
            return await self._fail_job(key, run, "OwnerChanged", str(exc))
        except AccountError as exc:
            return await self._fail_job(key, run, "NoSuchUser", str(exc))
        wanted = gpus.gpu_count(container)
        flavors = gpus.admitted_flavors(await self._workload(key, job), slot.pod_set) if wanted else {}
        holder = f"{key}#{index}"
        # A gang's pods start together: the first one picks a GPU domain with room for all.
        devices = self.devices.take(holder, flavors.get(GPU_RESOURCE), wanted, together=together)
        if devices is None:
            message = f"waiting for {wanted} free GPU(s) of {flavors.get(GPU_RESOURCE) or 'any flavor'}"
            if run.waiting != message:
                run.waiting = message
                await self._write_status(key)
            return False
        run.waiting = ""
        try:
            return await self._launch(key, job, run, slot, argv, owner, devices)
        except (OSError, FenceError) as exc:
            # The same cause would stop every retry (a folder, a log, a cgroup, a user that
            # cannot be set up): fail the job and give its quota back instead of trying for ever.
            self.devices.release(holder)
            message = f"pod {slot.name} {exc}" if isinstance(exc, FenceError) else _start_failure(slot, exc)
            blocked = unreachable_ancestor(self.isolation.work_root)
            if (
                blocked is not None
                and self.isolation.switch_users
                and str(self.isolation.work_root) in message
            ):
                message += f"; {blocked} is closed to other users (pass another --work-dir)"
            return await self._fail_job(key, run, POD_START_FAILED, message)

    async def _launch(
        self,
        key: Key,
        job: Manifest,
        run: JobRun,
        slot: PodSlot,
        argv: list[str],
        owner: RunAs,
        devices: list[str],
    ) -> bool:
        """Set up pod ``slot``'s log, folder and cgroup and ask the launcher to start it."""
        index, container = slot.index, slot.container
        pod_spec = slot.template.get("spec") or {}
        holder = f"{key}#{index}"
        log_path = self._log_folder(key, job) / f"{index}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        folder = self._folder_for(key, job, container, owner)
        self._serial += 1
        marker = f"{self.marker}#{self._serial}"
        env = self.isolation.environment(
            owner, folder, container, self._variables(key, run, slot, devices, marker), slot.fields
        )
        with open(log_path, "ab") as out:
            out.write(
                f"--- pykueue: start of pod {slot.name} at {now_text()} as {owner.name} "
                f"devices={','.join(devices)}\n".encode()
            )
        cgroup = None
        if self.isolation.cgroups is not None:
            job_folder = bounded(f"{key.namespace}.{key.name}.{str(job['metadata'].get('uid') or '')[:8]}")
            cgroup = self.isolation.cgroups.pod(job_folder, index, Limits.of_container(container))
        switch = self.isolation.switch_users and owner.uid != os.getuid()
        request = {
            "argv": argv,
            "env": env,
            "cwd": str(folder),
            "log": str(log_path),
            "cgroups": cgroup.procs_files if cgroup is not None else [],
            "user": {"uid": owner.uid, "gid": owner.gid, "groups": list(owner.groups), "name": owner.name}
            if switch
            else None,
        }
        try:
            process = await self.launcher.spawn(request)
        except FenceError:
            if cgroup is not None:
                cgroup.remove()
            raise
        except LaunchError as exc:
            self.devices.release(holder)
            if cgroup is not None:
                cgroup.remove()
            with open(log_path, "ab") as out:
                out.write(f"--- pykueue: cannot start {argv[0]}: {exc}\n".encode())
            await self._pod_exited(key, index, 127, stopping=False)
            return True
        grace = float(pod_spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
        pod = Pod(key, index, process, devices, log_path, grace, owner.name, marker, cgroup, slot.name)
        probe, _ = probes.Probe.of_container(container)
        if probe is not None:
            pod.ready = False
            pod.prober = asyncio.ensure_future(self._probe(pod, probe, request))
        if not self.pods.get(key):
            run.busy_since = time.monotonic()
        self.pods.setdefault(key, {})[index] = pod
        self.starts += 1
        gpus_text = f", GPUs {','.join(devices)}" if devices else ""
        self.record(
            f"{key.namespace}/{key.name}: pod {slot.name} started (pid {process.pid}, user {owner.name}{gpus_text})",
            key.namespace,
        )
        if not run.start_time:
            run.start_time = now_text()
        self._spawn(self._watch_pod(pod))
        return True

    async def _probe(self, pod: Pod, probe: probes.Probe, request: dict[str, Any]) -> None:
        """Keep ``pod.ready`` as its readiness probe says, running exec probes in the pod's fences."""

        async def run_exec(command: tuple[str, ...], timeout: float) -> bool:
            try:
                checker = await self.launcher.spawn({**request, "argv": list(command), "log": os.devnull})
            except LaunchError:
                return False
            try:
                return await asyncio.wait_for(checker.wait(), timeout) == 0
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(checker.pid, signal.SIGKILL)
                return False

        async def changed(ready: bool) -> None:
            pod.ready = ready
            self.record(
                f"{pod.job.namespace}/{pod.job.name}: pod {pod.index} {'ready' if ready else 'not ready'}",
                pod.job.namespace,
            )
            await self._write_status(pod.job)

        await probes.watch(probe, run_exec, changed)

    def _folder_for(self, key: Key, job: Manifest, container: Manifest, owner: RunAs) -> Path:
        """The container's workingDir when given (entered as the owner), else the job's own folder."""
        wanted = str(container.get("workingDir") or "")
        if wanted and os.path.isabs(wanted) and os.path.isdir(wanted):
            return Path(wanted)  # whether the owner may enter it is checked as the owner, in the child
        return self.isolation.make_job_folder(key, job, owner)

    async def _fail_job(self, key: Key, run: JobRun, reason: str, message: str) -> bool:
        run.outcome = ("Failed", reason, message)
        self.record(f"{key.namespace}/{key.name}: failed ({message})", key.namespace)
        await self._write_status(key)
        return False

    async def _workload(self, key: Key, job: Manifest) -> Manifest | None:
        """The job's Workload (named as the job reconciler names it), or None."""
        uid = str(job["metadata"].get("uid") or "")
        name = jobframework.workload_name(key.kind, key.name, uid)
        try:
            return await self.store.get("Workload", key.namespace, name)
        except NotFound:
            return None

    def _variables(
        self, key: Key, run: JobRun, slot: PodSlot, devices: list[str], marker: str
    ) -> dict[str, str]:
        """pykueue's own variables, set last so a Job cannot hide them."""
        preempted = bool(run.preemptions or run.interruptions)
        return pod_variables(
            self.marker, marker, key, slot, devices, preempted, self.jobs.get(key), run.gang_port
        )

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ pod ends

    async def _watch_pod(self, pod: Pod) -> None:
        code = await pod.process.wait()
        if pod.prober is not None:
            pod.prober.cancel()
            await asyncio.gather(pod.prober, return_exceptions=True)
        pod.ready = False
        # The leader is gone; whatever it left behind, detached or not, goes too, before
        # its devices are freed.
        pod.kill_all()
        await self._reap(pod)
        pods = self.pods.get(pod.job, {})
        if pods.get(pod.index) is pod:
            del pods[pod.index]
        run = self.runs.get(pod.job)
        if not pods and run is not None and run.busy_since is not None:
            run.run_seconds += time.monotonic() - run.busy_since
            run.busy_since = None
        with contextlib.suppress(OSError), open(pod.log_path, "ab") as out:
            out.write(f"--- pykueue: pod {pod.index} exited with {code} at {now_text()}\n".encode())
        await self._pod_exited(pod.job, pod.index, code, pod.stopping)
        self._wake.set()

    async def _reap(self, pod: Pod) -> None:
        """Wait until every process of the pod is gone, then free its devices and its cgroup."""
        deadline = time.monotonic() + REAP_SECONDS
        pause = 0.001  # killed processes are usually gone within a millisecond or two
        while not pod.gone() and time.monotonic() < deadline:
            pod.kill_all()
            await asyncio.sleep(pause)
            pause = min(0.05, pause * 2)
        if pod.cgroup is not None:
            run = self.runs.get(pod.job)
            if run is not None:
                run.add_usage(pod.cgroup.usage())
            if pod.gone():
                pod.cgroup.remove()
            else:
                log.warning(
                    "%s: processes of pod %s would not die; its devices stay held", pod.job, pod.index
                )
                return
        self.devices.release(pod.holder)

    async def _pod_exited(self, key: Key, index: int, code: int, stopping: bool) -> None:
        run = self.runs.get(key)
        job = self.jobs.get(key)
        if run is None or job is None:
            return
        self._dirty.add(key)
        if stopping or run.outcome is not None:
            await self._write_status(key)
            return
        decided = pod_exits.pod_exited(key, job, run, index, code)
        if decided.retry is not None:
            run.retry_at[decided.retry] = time.monotonic() + self.backoff.delay(run.failed)
        if decided.message:
            self.record(decided.message, key.namespace)
        if decided.stop_others:
            self._stop_all(key)
        await self._write_status(key)

    def _stop_all(self, key: Key) -> None:
        for pod in self.pods.get(key, {}).values():
            self._stop(pod)

    def _stop(self, pod: Pod) -> None:
        if pod.stopping:
            return
        pod.stopping = True
        self._spawn(self._terminate(pod))

    async def _terminate(self, pod: Pod) -> None:
        pod.signal_all(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(pod.process.wait()), timeout=pod.grace)
        except TimeoutError:
            pod.kill_all()

    # -------------------------------------------------------------- status

    async def _write_status(self, key: Key) -> None:
        job = self.jobs.get(key)
        run = self.runs.get(key)
        if job is None or run is None:
            return
        status = status_of(job, run, self.pods.get(key, {}))
        previous = job.get("status") or {}
        if status == previous:
            return
        meta = job["metadata"]
        try:
            written = await self.store.update_status(
                {
                    "kind": key.kind,
                    "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
                    "status": status,
                }
            )
        except NotFound:
            return
        current = self.jobs.get(key)
        if current is None or version_number(current) < version_number(written):
            self.jobs[key] = written


def _start_failure(slot: PodSlot, exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"pod {slot.name} could not start: {exc.strerror or exc}{where}"


def log_folder(data_dir: Path, namespace: str, job: str, uid: str) -> Path:
    """Where one job's pod logs are: by uid, so a new job of a deleted job's name starts empty."""
    return data_dir / "logs" / namespace / job / (uid or "nouid")


def _eviction_reason(workload: Manifest | None) -> str:
    for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Evicted" and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or "evicted")
    if workload is not None and not (workload.get("spec") or {}).get("active", True):
        return "the workload was deactivated"
    return "its workload lost its quota reservation"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
