"""pykueue's controller and webhooks on one event loop, against a local control plane.

In a real cluster the webhook server sits behind a Service and the API server calls it by
DNS name. On a control plane running on this machine there is no Service network, so the
webhook configurations are registered by URL (``https://<host>:<port>``, 127.0.0.1 unless
told otherwise) with the server's own CA, and removed again when it stops. The kube tests'
controller fixture and ``pykueue dev-cluster`` both run pykueue this way.

With ``visibility`` the same server answers the visibility API, registered as the
APIServices behind a selector-less Service whose EndpointSlice holds the host's address
(`local_registration.register_local_visibility`): the API server refuses loopback addresses
there, so the host must be one of this machine's other addresses (dev-cluster's is).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from pykueue.api import crd
from pykueue.engine.config import EngineConfig
from pykueue.errors import NotFound
from pykueue.kube import certs, deploy, visibility_api, webhooks
from pykueue.kube.local_registration import LOCAL_VISIBILITY_SERVICE, register_local_visibility
from pykueue.multikueue import controller as multikueue
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.events import EventRecorder
from pykueue.reconcilers.manager import Manager
from pykueue.store import kubernetes
from pykueue.store.base import Key, Manifest

WEBHOOK_CONFIGURATIONS = (
    ("MutatingWebhookConfiguration", deploy.MUTATING_WEBHOOK),
    ("ValidatingWebhookConfiguration", deploy.VALIDATING_WEBHOOK),
)


@dataclass
class LocalPykueue:
    """The controller (and, with a namespace for its certificate Secret, the webhooks)."""

    kube_config: kubernetes.KubeConfig
    webhook_namespace: str = ""
    # What `pykueue controller` runs with (nominal quota first, asynchronous evictions).
    config: EngineConfig = field(
        default_factory=lambda: EngineConfig(nominal_first=True, async_evictions=True)
    )
    frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS
    settings: jobframework.Settings = field(default_factory=jobframework.Settings)
    resync_seconds: float = 0.3
    manager: Manager | None = None
    webhook_port: int = 0
    # Where the webhooks are served and registered; not loopback for the visibility API.
    webhook_host: str = "127.0.0.1"
    # Serve and register the visibility API (`kubectl get --raw /apis/visibility...`, kueuectl's positions).
    visibility: bool = False
    # As a MultiKueue manager (`pykueue.multikueue.controller`); None answers no such check.
    multikueue: multikueue.Settings | None = None
    # Where policy revisions are kept (ConfigMaps); "": not recorded.
    policy_history_namespace: str = ""

    async def run(self, stop: asyncio.Event, ready: asyncio.Event) -> None:
        """Serve until ``stop`` is set; ``ready`` once the controller has synced."""
        store = kubernetes.KubernetesStore(self.kube_config)
        self.manager = Manager(
            store,
            config=self.config,
            resync_seconds=self.resync_seconds,
            registry=integrations.registry(self.frameworks),
            settings=self.settings,
            events=EventRecorder(store),  # as `pykueue controller` writes them
            multikueue=multikueue.for_manager(self.multikueue),
            policy_history_namespace=self.policy_history_namespace,
        )
        server = await self._start_webhooks(store, self.manager) if self.webhook_namespace else None
        try:
            await self.manager.run(stop, ready)
        finally:
            if server is not None:
                for kind, name in self._registrations():
                    with contextlib.suppress(NotFound):
                        await store.delete(kind, "", name)
                await server.stop()
            await store.close()

    def _registrations(self) -> list[tuple[str, str]]:
        """The cluster-wide objects pointing at the server, removed when it stops (an APIService
        whose server is gone breaks discovery)."""
        found = list(WEBHOOK_CONFIGURATIONS)
        if self.visibility:
            found += [("APIService", doc["metadata"]["name"]) for doc in deploy.api_services("", "")]
        return found

    async def _start_webhooks(
        self, store: kubernetes.KubernetesStore, manager: Manager
    ) -> webhooks.WebhookServer:
        host = self.webhook_host
        # The API server checks an APIService's certificate for its Service's name.
        service_name = f"{LOCAL_VISIBILITY_SERVICE}.{self.webhook_namespace}.svc"
        config = webhooks.WebhookConfig(
            host=host,
            port=self.webhook_port,
            certs=certs.CertConfig(
                namespace=self.webhook_namespace,
                hosts=tuple(dict.fromkeys((host, "127.0.0.1", "localhost", service_name))),
            ),
            frameworks=self.frameworks,
            manage_jobs_without_queue_name=self.settings.manage_jobs_without_queue_name,
            feature_gates=dict(self.config.feature_gates),
        )

        async def exists(namespace: str, name: str) -> bool:
            # The informer cache once synced, else the API server.
            if manager.passes:
                return Key("LocalQueue", namespace, name) in manager.admission.cache
            try:
                await store.get("LocalQueue", namespace, name)
            except NotFound:
                return False
            return True

        async def get(kind: str, namespace: str, name: str) -> Manifest | None:
            if manager.passes:
                return manager.admission.cache.get(Key(kind, namespace, name))
            try:
                found: Manifest = await store.get(kind, namespace, name)
            except NotFound:
                return None
            return found

        source = None
        if self.visibility:
            # As `pykueue controller`: answers from the engine once a pass ran.
            source = visibility_api.Source(
                state=lambda: manager.admission.state if manager.passes else None,
                authorizer=visibility_api.subject_access_reviewer(store.request),
            )
        on_review = manager.policy.note_request if manager.policy is not None else None
        server = webhooks.WebhookServer(
            config, store, exists, rotate=False, on_review=on_review, objects=get, visibility=source
        )
        await server.start()
        assert server.certificates is not None
        bracketed = f"[{host}]" if ":" in host else host
        client = crd.WebhookClientConfig(
            url=f"https://{bracketed}:{server.port}", ca_bundle=server.certificates.ca_bundle
        )
        await store.apply(
            deploy.mutating_webhook_configuration(client, self.webhook_namespace, self.frameworks)
        )
        await store.apply(
            deploy.validating_webhook_configuration(client, self.webhook_namespace, self.frameworks)
        )
        if source is not None:
            await register_local_visibility(
                store, host, server.port, self.webhook_namespace, server.certificates.ca_bundle
            )
        return server
