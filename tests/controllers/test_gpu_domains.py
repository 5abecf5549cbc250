"""GPU domains of a standalone node: read from nvidia-smi's matrix or the config, and used to place pods."""

from __future__ import annotations

import pytest

from pykueue.errors import InputError
from pykueue.standalone.node.machine import DeviceTable, Node, checked_domains, nvlink_domains

# The shape `nvidia-smi topo -m` prints: two NVLink islands of two GPUs, a NIC column, affinities.
MATRIX = """\
        GPU0    GPU1    GPU2    GPU3    NIC0    CPU Affinity    NUMA Affinity
GPU0     X      NV12    SYS     SYS     PXB     0-31            0
GPU1    NV12     X      SYS     SYS     PXB     0-31            0
GPU2    SYS     SYS      X      NV12    SYS     32-63           1
GPU3    SYS     SYS     NV12     X      SYS     32-63           1
NIC0    PXB     PXB     SYS     SYS      X

Legend:
  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_nvlink_islands_are_the_domains() -> None:
    assert nvlink_domains(MATRIX) == (("0", "1"), ("2", "3"))


def test_nvlink_joins_transitively_and_a_lone_gpu_is_its_own_domain() -> None:
    chain = """\
        GPU0    GPU1    GPU2
GPU0     X      NV1     PHB
GPU1    NV1      X      NV2
GPU2    PHB     NV2      X
"""
    assert nvlink_domains(chain) == (("0", "1", "2"),)
    pcie = chain.replace("NV1", "PHB").replace("NV2", "PHB")
    assert nvlink_domains(pcie) == (("0",), ("1",), ("2",))
    assert nvlink_domains("No devices were found") == ()


def test_declared_domains_must_name_known_devices_once() -> None:
    assert checked_domains([["0", "2"], [1, 3]], ["0", "1", "2", "3"]) == (("0", "2"), ("1", "3"))
    with pytest.raises(InputError, match=r"node.gpuDomains\[1\]: no GPU '7'"):
        checked_domains([["0"], ["7"]], ["0", "1"])
    with pytest.raises(InputError, match=r"node.gpuDomains\[1\]: GPU '0' is in two domains"):
        checked_domains([["0", "1"], ["0"]], ["0", "1"])
    with pytest.raises(InputError, match=r"node.gpuDomains\[0\]: a domain is a non-empty list"):
        checked_domains(["01"], ["0", "1"])


def _table(domains: tuple[tuple[str, ...], ...]) -> DeviceTable:
    return DeviceTable(Node(8, 2**34, {"a100": ("0", "1", "2", "3")}, "config", domains))


def test_a_pod_gets_its_gpus_from_one_domain_the_tightest_that_fits() -> None:
    table = _table((("0", "2"), ("1", "3")))
    assert table.take("default/one#0", "a100", 1) == ["0"]
    # Without domains the next two free devices would be 1 and 2, across both domains.
    assert table.take("default/two#0", "a100", 2) == ["1", "3"]
    assert table.take("default/three#0", "a100", 1) == ["2"]
    assert table.take("default/four#0", "a100", 1) is None


def test_a_gangs_pods_share_the_domain_its_first_pod_chose() -> None:
    table = _table((("0", "1", "2"), ("3",)))
    # One GPU for the first rank of a 3-rank gang: the lone device would fit it more tightly,
    # but only the large domain holds the whole gang.
    assert table.take("default/ddp#0", "a100", 1, together=3) == ["0"]
    assert table.take("default/ddp#1", "a100", 1, together=3) == ["1"]
    assert table.take("default/ddp#2", "a100", 1, together=3) == ["2"]


def test_a_single_gpu_fills_a_started_domain_and_a_wide_one_is_spread_only_without_room() -> None:
    table = _table((("0", "1"), ("2", "3")))
    assert table.take("default/small#0", "a100", 1) == ["0"]
    assert table.take("default/small2#0", "a100", 1) == ["1"]  # keeps the other domain whole
    table.release("default/small2#0")
    # A gang of two needs a whole domain: the second one, though "1" fits one rank more tightly.
    assert table.take("default/pair#0", "a100", 1, together=2) == ["2"]
    # Now "1" and "3" are free, in different domains: a 2-GPU pod gets them, spread.
    assert table.take("default/wide#0", "a100", 2) == ["1", "3"]
