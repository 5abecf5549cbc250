"""Fixtures that run a real Kubernetes control plane on loopback (see docs/testing.md).

Session-scoped, each one building on the previous:

* ``kube_apiserver``      etcd + kube-apiserver (RBAC, TLS, client-cert and token auth)
* ``kube_control_plane``  + kube-controller-manager + kube-scheduler
* ``kwok_cluster``        + kwok, which runs fake nodes and the pods bound to them

All three yield the same :class:`KubeCluster` (``.kubeconfig``, ``.server``, ``.token``,
``.request()``, ``.kubectl()``, ...). Per test:

* ``kube_namespace``  a fresh Namespace (its name), deleted afterwards
* ``fake_nodes``      a factory ``fake_nodes(count, labels=..., taints=..., capacity=...)`` that
  creates Ready kwok nodes and deletes them afterwards
"""

from __future__ import annotations

import atexit
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .controlplane import ControlPlaneError, KubeCluster, NodeSpec, find_bin_dir, stop_all_processes

# Children also die with the test process (PR_SET_PDEATHSIG); this covers a normal interpreter exit
# that skipped the fixtures' teardown.
atexit.register(stop_all_processes)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.kube)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_all_processes()


# Start-up times of the components this session started, shown in pytest's summary.
_TIMINGS: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _TIMINGS:
        parts = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in _TIMINGS.items())
        terminalreporter.write_line(f"kube control plane start-up: {parts}")


@pytest.fixture(scope="session")
def kube_bin_dir() -> Path:
    """The folder with etcd, kube-apiserver, ... kwok; fails (never skips) when they are missing."""
    try:
        return find_bin_dir()
    except ControlPlaneError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def kube_apiserver(kube_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    cluster = KubeCluster(kube_bin_dir, tmp_path_factory.mktemp("kube"))
    try:
        cluster.start_apiserver()
        _TIMINGS["etcd+kube-apiserver"] = cluster.timings["kube-apiserver"]
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kube_control_plane(kube_apiserver: KubeCluster) -> Iterator[KubeCluster]:
    try:
        kube_apiserver.start_controllers()
        _TIMINGS["controller-manager+scheduler"] = kube_apiserver.timings["controllers"]
        yield kube_apiserver
    finally:
        kube_apiserver.stop_components("kube-scheduler", "kube-controller-manager")


@pytest.fixture(scope="session")
def kwok_cluster(kube_control_plane: KubeCluster) -> Iterator[KubeCluster]:
    try:
        kube_control_plane.start_kwok()
        _TIMINGS["kwok"] = kube_control_plane.timings["kwok"]
        yield kube_control_plane
    finally:
        kube_control_plane.stop_components("kwok")


@pytest.fixture
def kube_namespace(kube_apiserver: KubeCluster) -> Iterator[str]:
    name = f"test-{secrets.token_hex(4)}"
    kube_apiserver.create_namespace(name)
    yield name
    kube_apiserver.delete(f"/api/v1/namespaces/{name}")


Taint = str | Mapping[str, str]
NodeFactory = Callable[..., list[dict[str, Any]]]


def parse_taint(taint: Taint) -> dict[str, str]:
    """``"key=value:Effect"`` or ``"key:Effect"`` (or a ready-made dict) as a Node taint."""
    if not isinstance(taint, str):
        return dict(taint)
    spec, _, effect = taint.rpartition(":")
    if not spec or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(f"bad taint {taint!r}: expected key[=value]:NoSchedule|PreferNoSchedule|NoExecute")
    key, _, value = spec.partition("=")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


@pytest.fixture
def fake_nodes(kwok_cluster: KubeCluster) -> Iterator[NodeFactory]:
    """Create kwok nodes for one test: ``fake_nodes(2, labels={...}, taints=[...], capacity={...})``.

    Returns the Node objects once they are Ready and untainted by the node lifecycle controller.
    capacity defaults to cpu 8, memory 32Gi, pods 110; add e.g. ``{"nvidia.com/gpu": "4"}``.
    """
    created: list[str] = []

    def make(
        count: int = 1,
        *,
        prefix: str = "kwok",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Taint] = (),
        capacity: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        batch = secrets.token_hex(3)
        specs = [
            NodeSpec(
                name=f"{prefix}-{batch}-{i}",
                labels=dict(labels or {}),
                taints=[parse_taint(t) for t in taints],
                capacity=dict(capacity or {}),
            )
            for i in range(count)
        ]
        created.extend(spec.name for spec in specs)
        return kwok_cluster.create_nodes(specs)

    yield make
    if created:
        kwok_cluster.delete_nodes(created)
