"""Feature gate TASAssignmentsEncodingByHostnamePrefix (on by default, as upstream): a topology
assignment is written as one slice per run of hosts sharing a name prefix when that is shorter;
off, as one slice. Both read back as the same domains."""

from __future__ import annotations

from typing import Any

from pykueue.api.conversion import topology_domains_to_slices
from pykueue.api.workload import TopologyAssignment
from pykueue.engine.config import EngineConfig
from pykueue.reconcilers.admission import AdmissionController
from pykueue.store.memory import MemoryStore

HOST = "kubernetes.io/hostname"
POOL_A = "gke-gpu-pool-a-7c9d2e1f-"
POOL_B = "gke-gpu-pool-b-3b4a5c6d-"


def _assignment(hosts: list[str], levels: tuple[str, ...] = (HOST,)) -> dict[str, Any]:
    return {
        "levels": list(levels),
        "domains": [{"values": [*(["r1"] * (len(levels) - 1)), h], "count": 1} for h in hosts],
    }


TWO_POOLS = [f"{POOL_A}{i}" for i in range(8)] + [f"{POOL_B}{i}" for i in range(8)]


def _slice(prefix: str, roots: list[str]) -> dict[str, Any]:
    return {
        "domainCount": len(roots),
        "valuesPerLevel": [{"individual": {"prefix": prefix, "roots": roots}}],
        "podCounts": {"universal": 1},
    }


def test_hosts_of_two_pools_are_written_as_one_slice_per_pool() -> None:
    written = topology_domains_to_slices(_assignment(TWO_POOLS))
    roots = [str(i) for i in range(8)]
    assert written == {"levels": [HOST], "slices": [_slice(POOL_A, roots), _slice(POOL_B, roots)]}


def test_with_the_gate_off_or_no_hostname_level_they_are_one_slice() -> None:
    roots = [h.removeprefix("gke-gpu-pool-") for h in TWO_POOLS]
    one = {"levels": [HOST], "slices": [_slice("gke-gpu-pool-", roots)]}
    assert topology_domains_to_slices(_assignment(TWO_POOLS), by_hostname_prefix=False) == one
    by_rack = topology_domains_to_slices(_assignment(TWO_POOLS, ("rack", "block")))
    assert len(by_rack["slices"]) == 1


def test_the_prefix_runs_are_kept_only_when_shorter() -> None:
    # Two short runs: a slice each would cost more than the one slice's longer roots.
    hosts = [f"{POOL_A}{i}" for i in range(2)] + [f"{POOL_B}{i}" for i in range(2)]
    assert len(topology_domains_to_slices(_assignment(hosts))["slices"]) == 1


def test_both_encodings_read_back_as_the_same_domains() -> None:
    hosts = [*TWO_POOLS[:8], "odd-host", *TWO_POOLS[8:]]
    wanted = [([h], 1) for h in hosts]
    for gate in (True, False):
        encoded = topology_domains_to_slices(_assignment(hosts), by_hostname_prefix=gate)
        assert [(list(v), c) for v, c in TopologyAssignment.model_validate(encoded).domains()] == wanted


def test_an_overlapping_prefix_and_suffix_keep_the_suffix_as_upstream() -> None:
    written = topology_domains_to_slices(_assignment(["ababa", "aba"]), by_hostname_prefix=False)
    assert written["slices"][0]["valuesPerLevel"] == [{"individual": {"suffix": "aba", "roots": ["ab", ""]}}]


def test_the_admission_controller_writes_with_the_configured_gate() -> None:
    assert AdmissionController(MemoryStore())._prefix_encoding is True
    off = EngineConfig(feature_gates={"TASAssignmentsEncodingByHostnamePrefix": False})
    assert AdmissionController(MemoryStore(), off)._prefix_encoding is False
