"""pykueue's controller and webhooks on one event loop, against a local control plane.

In a real cluster the webhook server sits behind a Service and the API server calls it by
DNS name. On a control plane running on this machine there is no Service network, so the
webhook configurations are registered by URL (``https://127.0.0.1:<port>``) with the
server's own CA, and removed again when it stops. The kube tests' controller fixture and
``pykueue dev-cluster`` both run pykueue this way.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from pykueue.api import crd
from pykueue.controllers import integrations, jobframework, multikueue
from pykueue.controllers.events import EventRecorder
from pykueue.controllers.kube_manager import KubeManager
from pykueue.engine.config import EngineConfig
from pykueue.errors import NotFound
from pykueue.server import certs, deploy, webhooks
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
    manager: KubeManager | None = None
    webhook_port: int = 0
    # As a MultiKueue manager (`pykueue.controllers.multikueue`); None answers no such check.
    multikueue: multikueue.Settings | None = None
    # Where policy revisions are kept (ConfigMaps); "": not recorded.
    policy_history_namespace: str = ""

    async def run(self, stop: asyncio.Event, ready: asyncio.Event) -> None:
        """Serve until ``stop`` is set; ``ready`` once the controller has synced."""
        store = kubernetes.KubernetesStore(self.kube_config)
        self.manager = KubeManager(
            store,
            config=self.config,
            resync_seconds=self.resync_seconds,
            registry=integrations.registry(self.frameworks),
            settings=self.settings,
            events=EventRecorder(store),  # as `pykueue controller` writes them
            multikueue_settings=self.multikueue,
            policy_history_namespace=self.policy_history_namespace,
        )
        server = await self._start_webhooks(store, self.manager) if self.webhook_namespace else None
        try:
            await self.manager.run(stop, ready)
        finally:
            if server is not None:
                for kind, name in WEBHOOK_CONFIGURATIONS:
                    with contextlib.suppress(NotFound):
                        await store.delete(kind, "", name)
                await server.stop()
            await store.close()

    async def _start_webhooks(
        self, store: kubernetes.KubernetesStore, manager: KubeManager
    ) -> webhooks.WebhookServer:
        config = webhooks.WebhookConfig(
            host="127.0.0.1",
            port=self.webhook_port,
            certs=certs.CertConfig(namespace=self.webhook_namespace, hosts=("127.0.0.1", "localhost")),
            frameworks=self.frameworks,
            manage_jobs_without_queue_name=self.settings.manage_jobs_without_queue_name,
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

        on_review = manager.policy.note_request if manager.policy is not None else None
        server = webhooks.WebhookServer(config, store, exists, rotate=False, on_review=on_review, objects=get)
        await server.start()
        assert server.certificates is not None
        client = crd.WebhookClientConfig(
            url=f"https://127.0.0.1:{server.port}", ca_bundle=server.certificates.ca_bundle
        )
        await store.apply(
            deploy.mutating_webhook_configuration(client, self.webhook_namespace, self.frameworks)
        )
        await store.apply(
            deploy.validating_webhook_configuration(client, self.webhook_namespace, self.frameworks)
        )
        return server
