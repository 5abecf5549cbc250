"""Fair sharing: dominant resource shares and the fair ordering of a cycle's entries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pykueue.engine.resources import FlavorResource, Quantities

if TYPE_CHECKING:
    from pykueue.engine.preemption import Preemptor, Target
    from pykueue.engine.scheduler import Entry
    from pykueue.engine.state import State
    from pykueue.engine.workloads import Workload


def order_entries(state: State, entries: list[Entry]) -> list[Entry]:
    """Order entries for admission under fair sharing (to be completed with preemption)."""
    from pykueue.engine.scheduler import classical_order_key

    return sorted(entries, key=classical_order_key)


def fair_preemptions(
    preemptor: Preemptor, cq_name: str, wl: Workload, frs: set[FlavorResource], requests: Quantities
) -> list[Target]:
    return []
