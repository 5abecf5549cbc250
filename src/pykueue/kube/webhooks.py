"""pykueue's admission and conversion webhooks: one HTTPS server the API server calls.

    POST /mutate-jobs             hold queue-named jobs of every enabled kind at creation
                                  (suspend a Job or JobSet, gate a Pod); give jobs without a
                                  queue the namespace's LocalQueue ``default`` (when it exists);
                                  hand jobs queued for MultiKueue to it (`multikueue.managed_by`).
                                  /mutate-batch-v1-job is the same handler (older manifests).
    POST /validate-jobs           upstream's job rules for every enabled kind: a valid queue
                                  name, a positive max-exec-time; a running job's queue, time
                                  limit and priority class stay (`job_validation.validate_on_*`)
    POST /mutate-kueue            fill in defaults our models have (for objects written in
                                  v1beta1, whose schema cannot default them)
    POST /validate-kueue          upstream's webhook rules (`pykueue.api.validation`): what
                                  CEL cannot check, answered with the field paths
    POST /convert                 ConversionReview v1beta1 <-> v1beta2 (`conversion_webhook`)
    GET  /healthz, /readyz        probes (ready once the certificate is in place)
    GET  /apis/visibility.kueue.x-k8s.io/...  the aggregated visibility API, when the server is
                                  given a `visibility_api.Source` (the API server's front proxy
                                  calls it; `visibility_api`)

Start it inside an asyncio program with `WebhookServer` (``await server.start()`` ...
``await server.stop()``) or `serve_webhooks` (runs until cancelled). It gets its
certificate from `certs` (a Secret it keeps fresh, with the CA published into the
webhook configurations and CRDs), so a cluster needs no cert-manager.

Every decision is a pure function of the AdmissionReview (plus "does this LocalQueue
exist?", asked through `LocalQueueLookup`), so the handlers are tested without HTTP,
and the HTTP layer only decodes, dispatches and encodes.

A denial reads like the API server's own: ``ClusterQueue.kueue.x-k8s.io "research" is
invalid: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than
or equal to the nominalQuota``, with one ``details.causes`` entry per field.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from pykueue.api import manifests, unsupported, validation
from pykueue.api.batch import QUEUE_NAME_LABEL
from pykueue.engine.config import DEFAULT_GATES
from pykueue.errors import FieldProblem, NotFound, StoreError, ValidationError
from pykueue.kube import certs, conversion_webhook, front_proxy, visibility_api
from pykueue.multikueue import managed_by as multikueue_managed_by
from pykueue.reconcilers import integrations, job_validation, jobframework

log = logging.getLogger(__name__)

Doc = dict[str, Any]
LocalQueueLookup = Callable[[str, str], Awaitable[bool]]
"""``await exists(namespace, name)``: whether that LocalQueue exists."""
ObjectLookup = multikueue_managed_by.ObjectLookup

KUEUE_GROUP: Final = "kueue.x-k8s.io"
JOB_PATH: Final = "/mutate-batch-v1-job"
JOBS_PATH: Final = "/mutate-jobs"
VALIDATE_JOBS_PATH: Final = "/validate-jobs"
# Set on the pod template by a parent queued through its pods (Deployment, StatefulSet).
SUSPENDED_BY_PARENT: Final = "kueue.x-k8s.io/pod-suspending-parent"
MUTATE_KUEUE_PATH: Final = "/mutate-kueue"
VALIDATE_KUEUE_PATH: Final = "/validate-kueue"
CONVERT_PATH: Final = "/convert"

# Jobs created by these owners are queued through their owner (JobSet, Kubeflow, Ray...),
# never on their own, as upstream's "owner managed by Kueue" check.
MANAGED_OWNER_GROUPS: Final = frozenset(
    {"jobset.x-k8s.io", "kubeflow.org", "ray.io", "leaderworkerset.x-k8s.io", "trainer.kubeflow.org"}
)


@dataclass(frozen=True)
class WebhookConfig:
    """How the webhook server listens and what its Job webhook does.

    `manage_jobs_without_queue_name` is upstream's ``manageJobsWithoutQueueName``: every
    Job is suspended at creation, queue-named or not. `local_queue_defaulting` is
    upstream's ``LocalQueueDefaulting``: a Job without a queue gets the label
    ``kueue.x-k8s.io/queue-name: <default_queue_name>`` when that LocalQueue exists in
    its namespace (and is then suspended like any queue-named Job).
    """

    host: str = "0.0.0.0"
    port: int = 9443
    certs: certs.CertConfig = field(default_factory=certs.CertConfig)
    manage_jobs_without_queue_name: bool = False
    local_queue_defaulting: bool = True
    default_queue_name: str = "default"
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    # The configuration's integrations.frameworks: the job kinds the job webhook holds.
    frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> WebhookConfig:
        """The in-cluster settings the Deployment of `pykueue manifests` passes as environment:
        ``POD_NAMESPACE``, ``PYKUEUE_WEBHOOK_SECRET``, ``PYKUEUE_WEBHOOK_SERVICE``."""
        defaults = certs.CertConfig()
        cert_config = certs.CertConfig(
            namespace=environ.get("POD_NAMESPACE", defaults.namespace),
            secret_name=environ.get("PYKUEUE_WEBHOOK_SECRET", defaults.secret_name),
            service_name=environ.get("PYKUEUE_WEBHOOK_SERVICE", defaults.service_name),
        )
        return cls(certs=cert_config, **overrides)


# --- AdmissionReview plumbing ----------------------------------------------------------------


def _allowed(request: Doc, patch: list[Doc] | None = None) -> Doc:
    response: Doc = {"uid": request.get("uid", ""), "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode("ascii")
    return response


def _denied(request: Doc, problems: list[FieldProblem]) -> Doc:
    obj = request.get("object") or {}
    kind = (request.get("kind") or {}).get("kind") or obj.get("kind", "?")
    api_version = str(obj.get("apiVersion") or f"{KUEUE_GROUP}/")
    group = (request.get("kind") or {}).get("group", api_version.rpartition("/")[0])
    name = (obj.get("metadata") or {}).get("name") or request.get("name", "")
    details = "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems)
    return {
        "uid": request.get("uid", ""),
        "allowed": False,
        "status": {
            "status": "Failure",
            "code": 422,
            "reason": "Invalid",
            "message": f'{kind}.{group} "{name}" is invalid: {details}'
            if group
            else f'{kind} "{name}" is invalid: {details}',
            "details": {
                "name": name,
                "group": group,
                "kind": kind,
                "causes": [
                    {"field": p.path, "message": p.message, "reason": "FieldValueInvalid"} for p in problems
                ],
            },
        },
    }


def admission_review(response: Doc) -> Doc:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _escape(key: str) -> str:
    """A JSON pointer token (RFC 6901): ``kueue.x-k8s.io/queue-name`` -> ``kueue.x-k8s.io~1queue-name``."""
    return key.replace("~", "~0").replace("/", "~1")


# --- Jobs -------------------------------------------------------------------------------------


def _managed_by_owner(job: Doc, enabled: jobframework.Registry) -> bool:
    if enabled.managed_owner(job) is not None:
        return True
    for ref in (job.get("metadata") or {}).get("ownerReferences") or []:
        group = str(ref.get("apiVersion", "")).partition("/")[0]
        if ref.get("controller") and group in MANAGED_OWNER_GROUPS:
            return True
    return False


def json_patch(old: Any, new: Any, path: str = "") -> list[Doc]:
    """RFC 6902 operations that turn ``old`` into ``new`` (maps key by key, lists whole)."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[Doc] = []
        for key, value in new.items():
            pointer = f"{path}/{_escape(str(key))}"
            if key not in old:
                ops.append({"op": "add", "path": pointer, "value": value})
            elif old[key] != value:
                ops.extend(json_patch(old[key], value, pointer))
        ops.extend({"op": "remove", "path": f"{path}/{_escape(str(k))}"} for k in old if k not in new)
        return ops
    return [] if old == new else [{"op": "replace", "path": path, "value": new}]


def _integration_of(request: Doc, job: Doc) -> jobframework.Integration | None:
    kind = request.get("kind") or {}
    if kind.get("kind"):
        group, version = str(kind.get("group") or ""), str(kind.get("version") or "")
        return integrations.by_kind(f"{group}/{version}" if group else version, str(kind["kind"]))
    return integrations.by_kind(str(job.get("apiVersion") or ""), str(job.get("kind") or ""))


async def mutate_job(
    request: Doc,
    config: WebhookConfig,
    queues: LocalQueueLookup | None,
    objects: ObjectLookup | None = None,
) -> Doc:
    """Upstream's job defaulting for every enabled kind: default LocalQueue, then hold what Kueue
    manages, then (with ``objects`` to look the queue up) hand it to MultiKueue if its queue says so.

    Holding is the kind's own `JobAdapter.suspend` (``spec.suspend`` for a Job or JobSet,
    the ``kueue.x-k8s.io/admission`` scheduling gate for a Pod), sent as a JSON patch.
    """
    job = request.get("object") or {}
    integration = _integration_of(request, job)
    operation = request.get("operation")
    if integration is None or integration.name not in config.frameworks:
        return _allowed(request)
    if integration.mutate is not None and operation in ("CREATE", "UPDATE"):
        # A kind queued through its pods: hand the queue down to its pod template.
        handed = copy.deepcopy(job)
        integration.mutate(handed)
        return _allowed(request, json_patch(job, handed))
    if operation != "CREATE" or integration.adapter is None:
        return _allowed(request)
    enabled = integrations.registry(config.frameworks)
    if _managed_by_owner(job, enabled):
        return _allowed(request)
    metadata = job.get("metadata") or {}
    namespace = metadata.get("namespace") or request.get("namespace") or ""
    held = copy.deepcopy(job)
    queue = jobframework.queue_name_of(job)
    defaulting = not queue and config.local_queue_defaulting and queues is not None
    if defaulting and queues is not None and await queues(namespace, config.default_queue_name):
        queue = config.default_queue_name
        held.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_NAME_LABEL] = queue
    adapter = integration.adapter()
    by_parent = bool(jobframework.annotations_of(job).get(SUSPENDED_BY_PARENT))
    if queue or by_parent or config.manage_jobs_without_queue_name:
        if not adapter.is_suspended(held):
            adapter.suspend(held)
        # A kind held by scheduling gates (a Pod) waits behind the topology gate too (TAS).
        hold_for_topology = getattr(adapter, "hold_for_topology", None)
        if hold_for_topology is not None and _gate(config, "TopologyAwareScheduling"):
            hold_for_topology(held)
    if integration.multikueue is not None and objects is not None:
        await multikueue_managed_by.hand_over(integration.multikueue(), held, namespace, objects)
    return _allowed(request, json_patch(job, held))


async def validate_job(request: Doc, config: WebhookConfig, queues: LocalQueueLookup | None) -> Doc:
    """Upstream's job validation for every enabled kind, on create and update (with field paths)."""
    job = request.get("object") or {}
    integration = _integration_of(request, job)
    operation = request.get("operation")
    if integration is None or integration.name not in config.frameworks:
        return _allowed(request)
    if operation not in ("CREATE", "UPDATE") or (job.get("metadata") or {}).get("deletionTimestamp"):
        return _allowed(request)
    old = request.get("oldObject") if operation == "UPDATE" else None
    if integration.adapter is None:
        # A kind queued through its pods (a LeaderWorkerSet) has only its own rules.
        problems = _kind_rules(integration, config, job, old)
        return _denied(request, problems) if problems else _allowed(request)
    if old:
        namespace = (job.get("metadata") or {}).get("namespace") or request.get("namespace") or ""
        default_exists = (
            config.local_queue_defaulting
            and queues is not None
            and bool(jobframework.queue_name_of(old))
            and not jobframework.queue_name_of(job)
            and await queues(namespace, config.default_queue_name)
        )
        problems = job_validation.validate_on_update(integration.adapter(), old, job, bool(default_exists))
    else:
        problems = job_validation.validate_on_create(job)
    problems.extend(job_validation.validate_prebuilt_workload(integration, job, old or None))
    # Elastic jobs (upstream's Workload slices) are not implemented: refused, not run as rigid jobs.
    problems.extend(unsupported.elastic_job_problems((job.get("metadata") or {}).get("annotations")))
    problems.extend(_kind_rules(integration, config, job, old))
    return _denied(request, problems) if problems else _allowed(request)


def _gate(config: WebhookConfig, name: str) -> bool:
    return config.feature_gates.get(name, DEFAULT_GATES.get(name, False))


def _kind_rules(
    integration: jobframework.Integration, config: WebhookConfig, job: Doc, old: Doc | None
) -> list[FieldProblem]:
    """The kind's own webhook rules, unless the feature gate they depend on is off."""
    if integration.validate is None or (
        integration.validate_gate and not _gate(config, integration.validate_gate)
    ):
        return []
    return integration.validate(job, old or None)


# --- Kueue objects ----------------------------------------------------------------------------


def _options(config: WebhookConfig) -> manifests.LoadOptions:
    return manifests.LoadOptions(feature_gates=dict(config.feature_gates))


def _missing(original: Any, defaulted: Any, path: str, out: list[Doc]) -> None:
    """JSON-patch ``add`` operations for what `defaulted` has and `original` lacks."""
    if isinstance(original, dict) and isinstance(defaulted, dict):
        for key, value in defaulted.items():
            pointer = f"{path}/{_escape(key)}"
            if key not in original:
                out.append({"op": "add", "path": pointer, "value": value})
            else:
                _missing(original[key], value, pointer, out)
    elif isinstance(original, list) and isinstance(defaulted, list) and len(original) == len(defaulted):
        for index, (old, new) in enumerate(zip(original, defaulted, strict=True)):
            _missing(old, new, f"{path}/{index}", out)


def default_kueue_object(request: Doc, config: WebhookConfig) -> Doc:
    """Add the defaults our models give (never rewrite what is there); bad input is left
    for the validating webhook to refuse with its reasons."""
    obj = request.get("object") or {}
    if request.get("operation") not in ("CREATE", "UPDATE") or request.get("subResource"):
        return _allowed(request)
    try:
        model = manifests.parse_object(obj, options=_options(config))
    except ValidationError:
        return _allowed(request)
    wire = manifests.to_manifest(model)
    patch: list[Doc] = []
    for key, value in wire.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        if key not in obj:
            patch.append({"op": "add", "path": f"/{_escape(key)}", "value": value})
        else:
            _missing(obj[key], value, f"/{_escape(key)}", patch)
    return _allowed(request, patch)


def validate_kueue_object(request: Doc, config: WebhookConfig) -> Doc:
    """Upstream's webhook rules on create and update, with the field path of each problem."""
    operation = request.get("operation")
    obj = request.get("object") or {}
    if operation not in ("CREATE", "UPDATE"):
        return _allowed(request)
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return _allowed(request)  # being deleted: let finalizers go
    options = _options(config)
    problems: list[FieldProblem] = []
    try:
        new = manifests.parse_object(obj, options=options)
    except ValidationError as err:
        problems = list(err.problems)
    else:
        old_doc = request.get("oldObject")
        if operation == "UPDATE" and old_doc:
            try:
                old = manifests.parse_object(old_doc, options=options)
            except ValidationError:
                # An object stored before a rule existed must stay updatable: check only the change.
                old = None
            if old is not None:
                problems = validation.validate_update(old, new)
    return _denied(request, problems) if problems else _allowed(request)


# --- the app ---------------------------------------------------------------------------------


# Told of every allowed create or update of a Kueue object, with its AdmissionRequest (the
# policy history takes the user from it: a watch does not carry one).
ReviewListener = Callable[[Doc], None]


def create_app(
    config: WebhookConfig,
    queues: LocalQueueLookup | None,
    ready: Callable[[], bool],
    on_review: ReviewListener | None = None,
    objects: ObjectLookup | None = None,
) -> FastAPI:
    """The ASGI app; `ready` says whether /readyz may answer ok."""
    app = FastAPI(title="pykueue webhooks", docs_url=None, redoc_url=None, openapi_url=None)

    async def review_of(request: Request) -> Doc:
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("request"), dict):
            raise ValueError("not an AdmissionReview")
        review: Doc = body["request"]
        return review

    def bad_request(exc: Exception) -> JSONResponse:
        return JSONResponse({"error": f"bad review: {exc}"}, status_code=400)

    @app.post(JOBS_PATH)
    @app.post(JOB_PATH)
    async def job_webhook(request: Request) -> Any:
        try:
            review = await review_of(request)
        except ValueError as exc:
            return bad_request(exc)
        return admission_review(await mutate_job(review, config, queues, objects))

    @app.post(VALIDATE_JOBS_PATH)
    async def validate_jobs(request: Request) -> Any:
        try:
            review = await review_of(request)
        except ValueError as exc:
            return bad_request(exc)
        return admission_review(await validate_job(review, config, queues))

    @app.post(MUTATE_KUEUE_PATH)
    async def mutate_kueue(request: Request) -> Any:
        try:
            review = await review_of(request)
        except ValueError as exc:
            return bad_request(exc)
        return admission_review(default_kueue_object(review, config))

    @app.post(VALIDATE_KUEUE_PATH)
    async def validate_kueue(request: Request) -> Any:
        try:
            review = await review_of(request)
        except ValueError as exc:
            return bad_request(exc)
        answer = validate_kueue_object(review, config)
        if on_review is not None and answer.get("allowed"):
            on_review(review)
        return admission_review(answer)

    @app.post(CONVERT_PATH)
    async def convert(request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError as exc:
            return bad_request(exc)
        if not isinstance(body, dict):
            return bad_request(ValueError("not a ConversionReview"))
        return conversion_webhook.review(body)

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz() -> PlainTextResponse:
        if ready():
            return PlainTextResponse("ok")
        return PlainTextResponse("certificate not ready", status_code=503)

    return app


def store_objects(kube: certs.KubeAccess) -> ObjectLookup:
    """An `ObjectLookup` that asks the API server (the controller may pass its cache instead)."""

    async def get(kind: str, namespace: str, name: str) -> Doc | None:
        try:
            found: Doc = await kube.get(kind, namespace, name)
        except NotFound:
            return None
        return found

    return get


def store_lookup(kube: certs.KubeAccess) -> LocalQueueLookup:
    """A `LocalQueueLookup` that asks the API server (the controller may pass its cache instead)."""

    async def exists(namespace: str, name: str) -> bool:
        try:
            await kube.get("LocalQueue", namespace, name)
        except NotFound:
            return False
        return True

    return exists


class _Server(uvicorn.Server):
    # The program around us owns SIGTERM/SIGINT; uvicorn must not take them over.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class WebhookServer:
    """The HTTPS webhook server inside an asyncio program.

    server = WebhookServer(config, kube, queues=lookup)
    await server.start()        # socket bound, serving; certificate ensured + published
    ...                         # server.port, server.certificates.ca_bundle
    await server.stop()
    """

    def __init__(
        self,
        config: WebhookConfig,
        kube: certs.KubeAccess,
        queues: LocalQueueLookup | None = None,
        *,
        rotate: bool = True,
        visibility: visibility_api.Source | None = None,
        on_review: ReviewListener | None = None,
        objects: ObjectLookup | None = None,
    ) -> None:
        self.config = config
        self.kube = kube
        self.queues = queues if queues is not None else store_lookup(kube)
        # Kueue objects for the MultiKueue hand-over of new jobs (`multikueue.managed_by`).
        self.objects = objects if objects is not None else store_objects(kube)
        self.rotate = rotate
        self.ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl_context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.certificates: certs.Certificates | None = None
        self.rotator = certs.Rotator(kube, config.certs, self._use)
        self.app = create_app(
            config, self.queues, lambda: self.certificates is not None, on_review, self.objects
        )
        self.visibility = visibility
        self.front_proxy: front_proxy.RequestHeaderConfig | None = None
        if visibility is not None:
            self.app.include_router(
                visibility_api.create_router(
                    lambda: self.front_proxy, visibility.authorizer, visibility.state, visibility.estimated
                )
            )
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def port(self) -> int:
        if self._socket is None:
            return self.config.port
        port: int = self._socket.getsockname()[1]
        return port

    def _use(self, certificates: certs.Certificates) -> None:
        certificates.load_into(self.ssl_context)
        self.certificates = certificates
        log.info("webhook server certificate valid until %s", certificates.serving.not_after)

    async def start(self) -> None:
        """Bind the port (0 picks a free one), serve, and get the certificate from the cluster;
        when that fails, the port is closed again (the caller may start a new server)."""
        await self.listen()
        try:
            await self.connect()
        except BaseException:
            await self.stop()
            raise

    async def listen(self) -> None:
        """Bind the port and serve, before the API server answers: /healthz answers 200 and
        /readyz 503 meanwhile (the kubelet's probes do not check the certificate), so a pod
        started during an API outage is not restarted by its liveness probe. Until `connect`
        the port presents a throwaway self-signed certificate no webhook client trusts."""
        if self._server is not None:
            return
        certs.renew(self.config.certs, None).load_into(self.ssl_context)
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.config.host, self.config.port))
        sock.set_inheritable(True)
        self._socket = sock
        uv_config = uvicorn.Config(
            self.app,
            host=self.config.host,
            port=self.port,
            log_level="warning",
            lifespan="off",
            ssl_context_factory=lambda _config, _default: self.ssl_context,
            # Shows the visibility routes the client certificate the handshake verified.
            http=front_proxy.PeerCertProtocol,
        )
        self._server = _Server(uv_config)
        self._tasks.append(asyncio.create_task(self._server.serve(sockets=[sock]), name="webhook-server"))
        while not self._server.started:
            if self._tasks[0].done():
                self._tasks[0].result()  # raises what stopped it
                raise RuntimeError("webhook server stopped during start-up")
            await asyncio.sleep(0.02)
        log.info("webhook server listening on https://%s:%d", self.config.host, self.port)

    async def connect(self) -> None:
        """Get (or make) the certificate in the cluster and publish it; /readyz answers 200 from
        then on. Retryable errors while the API server is unreachable; call again."""
        await self.rotator.refresh()
        if self.visibility is not None:
            await self._trust_front_proxy()
        if self.rotate and len(self._tasks) == 1:
            self._tasks.append(asyncio.create_task(self.rotator.run(), name="webhook-cert-rotation"))

    async def _trust_front_proxy(self) -> None:
        """Read the API server's front-proxy settings; without them the webhooks still serve."""
        try:
            self.front_proxy = await front_proxy.RequestHeaderConfig.load(self.kube)
        except (NotFound, ValueError) as exc:
            log.warning("the visibility API answers 503: %s", exc)
            return
        except StoreError as exc:
            if exc.retryable:
                raise
            log.warning("the visibility API answers 503: %s", exc)
            return
        self.front_proxy.trust(self.ssl_context)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        for task in self._tasks[1:]:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._socket is not None:
            self._socket.close()
            self._socket = None


async def serve_webhooks(
    config: WebhookConfig,
    kube: certs.KubeAccess,
    queues: LocalQueueLookup | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the webhook server until `stop` is set (or the task is cancelled)."""
    server = WebhookServer(config, kube, queues)
    await server.start()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await server.stop()
