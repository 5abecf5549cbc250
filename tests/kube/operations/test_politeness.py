"""API-server politeness of `KubernetesStore`: client-side QPS/burst, on the real API server and alone.

Retries with backoff on 429/5xx (honouring Retry-After), the 410 re-list and the rate limit's
effect on requests are tested without a cluster in tests/store/test_kubernetes_store.py; the
controller's re-list after a failed watch in tests/controllers/test_watch_recovery.py.
"""

from __future__ import annotations

import asyncio
import time

from pykueue.store import kubernetes

from ..controlplane import KubeCluster


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    async def scenario() -> list[float]:
        bucket = kubernetes.TokenBucket(rate=50, burst=5)
        loop = asyncio.get_running_loop()
        start = loop.time()
        stamps = []
        for _ in range(15):
            await bucket.take()
            stamps.append(loop.time() - start)
        return stamps

    stamps = asyncio.run(scenario())
    assert stamps[4] < 0.05  # the burst goes at once
    assert 0.17 <= stamps[-1] < 0.6  # then 10 more at 50/s


def test_the_real_api_server_sees_at_most_qps_plus_burst(kube_apiserver: KubeCluster) -> None:
    async def scenario() -> float:
        config = kubernetes.load_kubeconfig(kube_apiserver.kubeconfig)
        store = kubernetes.KubernetesStore(config, qps=25, burst=5)
        try:
            start = time.monotonic()
            await asyncio.gather(*(store.list("Namespace") for _ in range(30)))
            return time.monotonic() - start
        finally:
            await store.close()

    assert asyncio.run(scenario()) >= 0.9  # 5 at once, 25 more at 25/s
