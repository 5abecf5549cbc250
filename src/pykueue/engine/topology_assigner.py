"""Placing a pod set on a flavor's topology: how many pods go to which domain.

It follows upstream Kueue's TAS algorithm in two phases:

    count     for every leaf, how many pods (and, with a leader, how many pods
              besides the leader) fit in its remaining capacity; then, bottom-up,
              every domain's pod and slice counts from its children's
    choose    at the requested level, the domains that take the pods:
              ``required`` — one domain or nothing; ``preferred`` — one domain,
              else go one level up and retry, at the top spread over several;
              ``unconstrained`` — as many domains of the lowest level as needed
    descend   level by level down to the leaves, give each chosen domain's pods
              to as few of its children as possible
    write     the leaves with pods, sorted by their path, as the assignment

Domains are taken in an order that depends on the algorithm: **BestFit**
(the default) takes the domains with the most free slices first but, for the
last one, the domain with the least capacity that still fits what is left;
**LeastFreeCapacity** (unconstrained requests, with upstream's
TASProfileMixed gate, on by default) takes the fullest domain that fits first.

Slices (``podset-slice-required-topology`` and ``podset-slice-size``) group
pods: a slice of ``size`` pods always shares one domain of the slice level,
and the pod set's count must be a multiple of it. A pod set group (a leader
pod set of one pod and its workers, ``podset-group-name``) is placed as one:
the leader goes where the workers' domain still has room for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pykueue.engine.selectors import Toleration, untolerated_taint
from pykueue.engine.topology_assignments import Domain as DomainCount
from pykueue.engine.topology_assignments import TopologyAssignment
from pykueue.engine.topology_requests import TopologyRequest
from pykueue.engine.topology_snapshot import Domain, FlavorSnapshot, Requests
from pykueue.engine.topology_types import INF, Exclusions, PodSetPlacement, count_in

MAX_REFRESH = 64  # more leaves changed than this since the counts were made: count again


class _Counts:
    """Per-domain counters of one placement, indexed by `Domain.idx` (and clones beyond)."""

    __slots__ = ("leaders", "pods", "pods_wl", "slices", "slices_wl")

    def __init__(self, size: int) -> None:
        self.pods = [0] * size
        self.slices = [0] * size
        self.pods_wl = [0] * size  # pods that fit besides the leader
        self.slices_wl = [0] * size
        self.leaders = [0] * size

    def copy(self) -> _Counts:
        other = _Counts(0)
        other.pods, other.slices = list(self.pods), list(self.slices)
        other.pods_wl, other.slices_wl = list(self.pods_wl), list(self.slices_wl)
        other.leaders = list(self.leaders)
        return other


@dataclass(slots=True)
class _Plan:
    count: int
    slice_size: int
    leader_count: int
    requested_level: int
    slice_level: int
    slice_size_at: dict[int, int]
    layers: tuple[tuple[str, int], ...]
    required: bool
    unconstrained: bool
    least_free: bool


@dataclass(slots=True)
class Placer:
    """Places pod sets on one flavor snapshot; ``least_free_mixed`` is TASProfileMixed."""

    snap: FlavorSnapshot
    least_free_mixed: bool = True
    simulate_empty: bool = False
    # Leaves outside this domain (its key) take nothing: a failed node's pods stay near.
    within: str = ""
    c: _Counts = field(init=False)
    stats: Exclusions = field(default_factory=Exclusions)
    # Orders of a level's domains by the counts as filled (before the descent changes
    # them), shared by the placements that reuse the same counts.
    _orders: dict[tuple[str, int, bool], list[Domain]] = field(default_factory=dict)
    _usable: frozenset[str] = frozenset()  # keys of the leaves this pod shape may use
    refreshed: bool = False  # counts were updated in place (exclusion counts may be stale)

    def __post_init__(self) -> None:
        self.c = _Counts(0)  # made by `_count` for each placement

    # ------------------------------------------------------------ entry point

    def place(
        self,
        workers: PodSetPlacement,
        leader: PodSetPlacement | None,
        assumed: Mapping[str, Requests],
    ) -> tuple[dict[str, TopologyAssignment], str]:
        """The assignments of ``workers`` (and ``leader``), or ({}, why not)."""
        plan, reason = self._plan(workers, leader)
        if plan is None:
            return {}, reason
        self._count(plan, workers, leader, assumed)
        fit_level, chosen, reason = self._find_level(plan.requested_level, plan)
        if reason and self.refreshed:
            self.refreshed = False
            self._count(plan, workers, leader, assumed, force=True)
            fit_level, chosen, reason = self._find_level(plan.requested_level, plan)
        if reason:
            return {}, reason
        chosen = self._descend(chosen, fit_level, plan)
        result: dict[str, TopologyAssignment] = {}
        if leader is not None:
            leader_domains: list[tuple[Domain, int]] = []
            worker_domains: list[tuple[Domain, int]] = []
            for domain in chosen:
                if self.c.leaders[domain.idx] > 0:
                    leader_domains.append((domain, self.c.leaders[domain.idx]))
                if self.c.pods[domain.idx] > 0:
                    worker_domains.append((domain, self.c.pods[domain.idx]))
            result[leader.name] = self._write(leader_domains)
            result[workers.name] = self._write(worker_domains)
        else:
            result[workers.name] = self._write([(d, self.c.pods[d.idx]) for d in chosen])
        return result, ""

    # ------------------------------------------------------------------ plan

    def _plan(self, workers: PodSetPlacement, leader: PodSetPlacement | None) -> tuple[_Plan | None, str]:
        snap = self.snap
        request = workers.request or TopologyRequest()
        layers = tuple((layer.topology, layer.size) for layer in request.slices)
        slice_size = 1
        if layers:
            slice_size = layers[0][1]
            if slice_size <= 0:
                return None, "slice topology requested, but slice size not provided"
        required = request.required is not None
        unconstrained = request.is_unconstrained() or workers.implied
        key = request.placement_level(snap.levels)
        if key is None and workers.implied:
            key = snap.levels[-1]
        if key is None:
            return None, "topology level not specified"
        requested = snap.level_index(key)
        if requested < 0:
            return None, f"no requested topology level: {key}"
        slice_key = layers[0][0] if layers else snap.levels[-1]
        slice_level = snap.level_index(slice_key)
        if slice_level < 0:
            return None, f"no requested topology level for slices: {slice_key}"
        if requested > slice_level:
            return None, f"podset slice topology {slice_key} is above the podset topology {key}"
        size_at, reason = self._inner_layers(layers, slice_size, slice_level)
        if reason:
            return None, reason
        return _Plan(
            count=workers.count,
            slice_size=slice_size,
            leader_count=1 if leader is not None else 0,
            requested_level=requested,
            slice_level=slice_level,
            slice_size_at=size_at,
            layers=layers if size_at else (),
            required=required,
            unconstrained=unconstrained,
            least_free=unconstrained and self.least_free_mixed,
        ), ""

    def _inner_layers(
        self, layers: tuple[tuple[str, int], ...], size: int, level: int
    ) -> tuple[dict[int, int], str]:
        """Slice size per level for the layers under the outermost one (multi-layer slices)."""
        result: dict[int, int] = {}
        previous_size, previous_level = size, level
        for topology, inner in layers[1:]:
            inner_level = self.snap.level_index(topology)
            if inner_level < 0:
                return {}, f"no requested topology level for additional slice layer: {topology}"
            if inner_level <= previous_level:
                return {}, (
                    f"additional slice layer topology {topology} must be at a lower level than "
                    f"{self.snap.levels[previous_level]}"
                )
            if previous_size % inner != 0:
                return (
                    {},
                    f"additional slice layer size {inner} must evenly divide parent layer size {previous_size}",
                )
            for between in range(previous_level + 1, inner_level + 1):
                result[between] = inner
            previous_size, previous_level = inner, inner_level
        return result, ""

    # ----------------------------------------------------------------- count

    def _count(
        self,
        plan: _Plan,
        workers: PodSetPlacement,
        leader: PodSetPlacement | None,
        assumed: Mapping[str, Requests],
        force: bool = False,
    ) -> None:
        """Phase one, reused from an earlier placement of the same pod shape on the same usage.

        The counts depend on one pod's requests and constraints, not on how many pods
        there are: in a cycle many heads share a shape, and nothing is admitted while
        the heads are nominated.
        """
        key = None
        if not assumed:
            key = (
                "counts",
                workers.shape(),
                leader.shape() if leader is not None else None,
                plan.slice_size,
                plan.slice_level,
                tuple(sorted(plan.slice_size_at.items())),
                self.within,
                self.simulate_empty,
            )
            cached = None if force else self.snap.cache.get(key)
            version = self._usage_version()
            if isinstance(cached, tuple) and cached[0] == version:
                counts, stats, self._orders, self._usable = cached[1], cached[2], cached[3], cached[4]
                self.c = counts.copy()
                self.stats = stats.copy()
                return
            if isinstance(cached, tuple) and self._refreshable(plan, leader):
                changed = self.snap.changed_since(cached[0])
                if changed is not None and len(changed) <= MAX_REFRESH:
                    self.c, self._usable = cached[1].copy(), cached[4]
                    self.stats = cached[2].copy()
                    self._orders = {}
                    self._refresh(changed, workers, plan)
                    self.refreshed = True
                    self.snap.cache[key] = (
                        version,
                        self.c.copy(),
                        self.stats.copy(),
                        self._orders,
                        self._usable,
                    )
                    return
        self.c = _Counts(len(self.snap.domains))
        self.stats = Exclusions()
        self._orders = {}
        self._fill_leaves(workers, leader, assumed)
        self._fill_up(plan)
        if key is not None:
            entry = (
                self._usage_version(),
                self.c.copy(),
                self.stats.copy(),
                self._orders,
                self._usable,
            )
            self.snap.cache[key] = entry

    def _usage_version(self) -> int:
        """The usage the counts depend on: none when every TAS workload is assumed gone."""
        return -1 if self.simulate_empty else self.snap.usage_version[0]

    def _refreshable(self, plan: _Plan, leader: PodSetPlacement | None) -> bool:
        # Only plain sums are updated in place; a leader or inner slice layers recount all.
        return leader is None and not plan.slice_size_at and not self.within

    def _refresh(self, changed: set[str], workers: PodSetPlacement, plan: _Plan) -> None:
        """Counts of the leaves whose usage moved, and of their ancestors, recomputed.

        Exclusion counts are not: a placement that fails after a refresh counts again
        from scratch, so its message is exact.
        """
        c, snap = self.c, self.snap
        free = snap.free_columns(self.simulate_empty)
        leaf_level = len(snap.levels) - 1
        touched: list[set[Domain]] = [set() for _ in snap.levels]
        for key in sorted(changed):
            leaf = snap.leaves.get(key)
            if leaf is None or key not in self._usable:
                continue
            pods = count_in(workers.requests, self._free(leaf, free, None))[0]
            c.pods[leaf.idx] = c.pods_wl[leaf.idx] = pods
            if leaf_level == plan.slice_level:
                c.slices[leaf.idx] = c.slices_wl[leaf.idx] = pods // plan.slice_size
            parent = leaf.parent
            level = leaf_level - 1
            while parent is not None:
                touched[level].add(parent)
                parent, level = parent.parent, level - 1
        for level in range(leaf_level - 1, -1, -1):
            for domain in touched[level]:
                self._sum_domain(domain, level, plan)

    def _fill_leaves(
        self, workers: PodSetPlacement, leader: PodSetPlacement | None, assumed: Mapping[str, Requests]
    ) -> None:
        snap, c, stats = self.snap, self.c, self.stats
        leaves = self._candidates(workers)
        if self.within:
            inside = [leaf for leaf in leaves if leaf.within(self.within)]
            stats.topology_domain += len(leaves) - len(inside)
            leaves = inside
        self._usable = frozenset(leaf.key for leaf in leaves)
        free = snap.free_columns(self.simulate_empty)
        pods = self._counts(workers.requests, leaves, free)
        if len(leaves) == len(snap.leaf_list) and leaves:
            start = leaves[0].idx
            c.pods[start : start + len(pods)] = pods
            if leader is None:
                c.pods_wl[start : start + len(pods)] = pods
        else:
            for leaf, count in zip(leaves, pods, strict=True):
                c.pods[leaf.idx] = count
                if leader is None:
                    c.pods_wl[leaf.idx] = count
        extra = [leaf for leaf in leaves if leaf.key in assumed] if assumed else []
        if leader is not None or extra:
            # The slow path, leaf by leaf: a leader takes room first, or pods of the
            # same workload were placed here a moment ago.
            for leaf in extra if leader is None else leaves:
                self._fill_leaf(leaf, workers, leader, assumed.get(leaf.key))
        for leaf in leaves:
            if c.pods[leaf.idx] == 0:
                _, limiting = count_in(workers.requests, self._free(leaf, free, assumed.get(leaf.key)))
                if limiting:
                    stats.resources[limiting] = stats.resources.get(limiting, 0) + 1

    def _candidates(self, workers: PodSetPlacement) -> list[Domain]:
        """The leaves whose node takes the pods (taints, selector, affinity), cached per shape."""
        snap = self.snap
        if not snap.lowest_is_host:
            self.stats.total += len(snap.leaf_list)
            return snap.leaf_list
        tolerations = (*workers.tolerations, *snap.tolerations)
        key = (
            "feasible",
            tolerations,
            tuple(sorted(workers.node_selector.items())),
            tuple(workers.affinity_terms or ()),
        )
        cached = snap.cache.get(key)
        if not isinstance(cached, tuple):
            probe = Exclusions()
            saved, self.stats = self.stats, probe
            found = [
                leaf
                for leaf in snap.leaf_list
                if leaf.node is None or self._feasible(leaf, workers, tolerations)
            ]
            self.stats = saved
            probe.total = len(snap.leaf_list)
            cached = (found, probe)
            snap.cache[key] = cached
        found, probe = cached
        stats = self.stats
        stats.total += probe.total
        stats.node_selector += probe.node_selector
        stats.affinity += probe.affinity
        for taint, n in probe.taints.items():
            stats.taints[taint] = stats.taints.get(taint, 0) + n
        return list(found)

    def _counts(
        self, requests: Mapping[str, int], leaves: list[Domain], free: dict[str, list[int]]
    ) -> list[int]:
        """How many pods fit in each leaf, one resource column at a time."""
        full = leaves is self.snap.leaf_list or len(leaves) == len(self.snap.leaf_list)
        counts: list[int] | None = None
        for resource in sorted(requests):
            value = requests[resource]
            if value == 0:
                continue
            column = free.get(resource)
            if column is None:
                return [0] * len(leaves)
            if not full:
                column = [column[leaf.pos] for leaf in leaves]
            fits = [have // value for have in column]
            counts = fits if counts is None else list(map(min, counts, fits))
        if counts is None:
            return [INF] * len(leaves)
        return [n if n > 0 else 0 for n in counts]

    @staticmethod
    def _free(leaf: Domain, free: dict[str, list[int]], extra: Requests | None) -> Requests:
        result = {resource: column[leaf.pos] for resource, column in free.items()}
        for resource, value in (extra or {}).items():
            result[resource] = result.get(resource, 0) - value
        return result

    def _fill_leaf(
        self, leaf: Domain, workers: PodSetPlacement, leader: PodSetPlacement | None, extra: Requests | None
    ) -> None:
        c = self.c
        free = self._free(leaf, self.snap.free_columns(self.simulate_empty), extra)
        c.pods[leaf.idx] = count_in(workers.requests, free)[0]
        if leader is not None and count_in(leader.requests, free)[0] > 0:
            c.leaders[leaf.idx] = 1
            for resource, value in leader.requests.items():
                free[resource] = free.get(resource, 0) - value
        c.pods_wl[leaf.idx] = count_in(workers.requests, free)[0]

    def _feasible(self, leaf: Domain, ps: PodSetPlacement, tolerations: Sequence[Toleration]) -> bool:
        node = leaf.node
        assert node is not None
        taint = untolerated_taint(node.taints, tolerations)
        if taint is not None:
            text = (
                f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"
            )
            self.stats.taints[text] = self.stats.taints.get(text, 0) + 1
            return False
        if any(node.labels.get(k) != v for k, v in ps.node_selector.items()):
            self.stats.node_selector += 1
            return False
        if ps.affinity_terms and not any(
            term.matches_node(node.labels, node.name) for term in ps.affinity_terms
        ):
            self.stats.affinity += 1
            return False
        return True

    def _fill_up(self, plan: _Plan) -> None:
        """Every domain's counts from its children's, bottom-up (leaves are filled)."""
        c = self.c
        depth = len(self.snap.levels)
        leaf_level = depth - 1
        if leaf_level == plan.slice_level:
            for leaf in self.snap.per_level[leaf_level]:
                c.slices[leaf.idx] = c.pods[leaf.idx] // plan.slice_size
                c.slices_wl[leaf.idx] = c.pods_wl[leaf.idx] // plan.slice_size
        with_leader = plan.leader_count > 0
        for level in range(depth - 2, -1, -1):
            inner = plan.slice_size_at.get(level + 1)
            if not with_leader and not inner:
                self._sum_up(level, plan)
                continue
            for domain in self.snap.per_level[level]:
                pods = slices = leaders = 0
                contributes = False
                min_pod_gap = min_slice_gap = INF
                for child in domain.children:
                    i = child.idx
                    child_pods, child_pods_wl = c.pods[i], c.pods_wl[i]
                    if inner:
                        child_pods = child_pods // inner * inner
                        child_pods_wl = child_pods_wl // inner * inner
                    pods += child_pods
                    slices += c.slices[i]
                    if not with_leader or c.leaders[i] > 0:
                        contributes = True
                        min_pod_gap = min(min_pod_gap, child_pods - child_pods_wl)
                        min_slice_gap = min(min_slice_gap, c.slices[i] - c.slices_wl[i])
                    leaders = max(leaders, c.leaders[i])
                j = domain.idx
                c.pods[j] = pods
                slices_wl = 0
                if contributes:
                    c.pods_wl[j] = pods - min_pod_gap
                    slices_wl = slices - min_slice_gap
                else:
                    c.pods_wl[j] = 0
                c.leaders[j] = leaders
                if level == plan.slice_level:
                    slices = pods // plan.slice_size
                    slices_wl = c.pods_wl[j] // plan.slice_size
                c.slices[j] = slices
                c.slices_wl[j] = slices_wl

    def _sum_up(self, level: int, plan: _Plan) -> None:
        """`_fill_up` for one level without a leader or inner slices: plain sums."""
        for domain in self.snap.per_level[level]:
            self._sum_domain(domain, level, plan)

    def _sum_domain(self, domain: Domain, level: int, plan: _Plan) -> None:
        c = self.c
        pods, slices = c.pods, c.slices
        kids = [child.idx for child in domain.children]
        total = sum([pods[i] for i in kids])
        j = domain.idx
        pods[j] = c.pods_wl[j] = total
        slices[j] = c.slices_wl[j] = (
            total // plan.slice_size if level == plan.slice_level else sum([slices[i] for i in kids])
        )

    # ---------------------------------------------------------------- choose

    def _sorted(self, domains: Sequence[Domain], least_free: bool, by_values: bool = False) -> list[Domain]:
        """Most (or, for LeastFreeCapacity, fewest) free slices first, then fewer free pods, then values.

        ``by_values``: the domains already come in the order of their values, so a stable
        sort on the counts alone gives the same order, faster.
        """
        c = self.c
        sign = 1 if least_free else -1
        if by_values:
            keys = [(sign * c.slices[d.idx], c.pods[d.idx]) for d in domains]
            return [domains[i] for i in sorted(range(len(domains)), key=keys.__getitem__)]
        return sorted(domains, key=lambda d: (sign * c.slices[d.idx], c.pods[d.idx], d.values))

    def _sorted_with_leader(self, domains: Sequence[Domain], least_free: bool) -> list[Domain]:
        """As `_sorted` by the counts besides a leader, leader domains first; ``domains`` are
        in the order of their values (a level's list)."""
        c = self.c
        sign = 1 if least_free else -1
        keys = [(-c.leaders[d.idx], sign * c.slices_wl[d.idx], c.pods_wl[d.idx]) for d in domains]
        return [domains[i] for i in sorted(range(len(domains)), key=keys.__getitem__)]

    def _best_fit(
        self, domains: Sequence[Domain], needed: int, counts: list[int], leader_count: int
    ) -> Domain:
        """The first domain with the least count that still holds ``needed`` (else the first)."""
        best, best_count = domains[0], INF
        leaders = self.c.leaders
        for domain in domains:
            if leaders[domain.idx] < leader_count:
                continue
            have = counts[domain.idx]
            if needed <= have < best_count:
                best, best_count = domain, have
        return best

    def _slice_counts(self, leader_count: int) -> list[int]:
        return self.c.slices_wl if leader_count > 0 else self.c.slices

    def _pod_counts(self, leader_count: int) -> list[int]:
        return self.c.pods_wl if leader_count > 0 else self.c.pods

    def _find_level(self, level: int, plan: _Plan) -> tuple[int, list[Domain], str]:
        c = self.c
        domains = self.snap.per_level[level]
        if not domains:
            return 0, [], f"no topology domains at level: {self.snap.levels[level]}"
        if plan.leader_count == 0:
            single = self._tightest(domains, plan.count // plan.slice_size)
            if single is not None:
                return level, [single], ""
        order_key = ("leader", level, plan.least_free)
        ordered = self._orders.get(order_key) or []
        if not ordered:
            ordered = self._orders[order_key] = self._sorted_with_leader(domains, plan.least_free)
        top = ordered[0]
        wanted = plan.count // plan.slice_size
        leaders = plan.leader_count
        best_fit = not plan.least_free
        if best_fit and c.slices_wl[top.idx] >= wanted and c.leaders[top.idx] >= leaders:
            top = self._best_fit(ordered, wanted, self._slice_counts(leaders), leaders)
        if plan.least_free:
            for candidate in ordered:
                have = c.slices[candidate.idx]
                if leaders > 0:
                    if c.leaders[candidate.idx] < leaders:
                        continue
                    have = c.slices_wl[candidate.idx]
                if have >= wanted:
                    return level, [candidate], ""
            if plan.required:
                return 0, [], self._not_fit(level, plan, c.pods[ordered[-1].idx], wanted)
        if c.slices_wl[top.idx] >= wanted and c.leaders[top.idx] >= leaders:
            return level, [top], ""
        if plan.required:
            return 0, [], self._not_fit(level, plan, c.slices[top.idx], wanted)
        if level > 0 and not plan.unconstrained:
            return self._find_level(level - 1, plan)
        return self._spread(level, ordered, wanted, plan)

    def _spread(
        self, level: int, ordered: list[Domain], wanted: int, plan: _Plan
    ) -> tuple[int, list[Domain], str]:
        """Several domains of the top level together (leaders' domains first)."""
        c = self.c
        best_fit = not plan.least_free
        chosen: list[Domain] = []
        left, leaders_left = wanted, plan.leader_count
        ordered = self._leader_first(ordered, plan.count, plan.leader_count, plan.slice_size, True)
        index = 0
        while leaders_left > 0 and index < len(ordered) and c.leaders[ordered[index].idx] > 0:
            domain = ordered[index]
            if best_fit and c.slices_wl[domain.idx] >= left:
                domain = self._best_fit(ordered[index:], left, c.slices_wl, leaders_left)
            chosen.append(domain)
            leaders_left -= c.leaders[domain.idx]
            left -= c.slices_wl[domain.idx]
            index += 1
        if leaders_left > 0:
            return 0, [], self._not_fit(level, plan, plan.leader_count - leaders_left, wanted)
        if index == 0:
            order_key = ("plain", level, plan.least_free)
            rest = self._orders.get(order_key) or []
            if not rest:
                rest = self._orders[order_key] = self._sorted(
                    self.snap.per_level[level], plan.least_free, by_values=True
                )
        else:
            rest = self._sorted(ordered[index:], plan.least_free)
        for position in range(len(rest)):
            if left <= 0:
                break
            domain = rest[position]
            if best_fit and c.slices[domain.idx] >= left:
                domain = self._best_fit(rest[position:], left, c.slices, 0)
            chosen.append(domain)
            left -= c.slices[domain.idx]
        if left > 0:
            return 0, [], self._not_fit(level, plan, wanted - left, wanted)
        return level, chosen, ""

    def _tightest(self, domains: list[Domain], wanted: int) -> Domain | None:
        """Without a leader, the one domain both algorithms choose when one holds every slice.

        BestFit's best fit among the domains sorted most free first, and LeastFreeCapacity's
        first fit among them sorted least free first, are the same domain: the fewest free
        slices that still hold ``wanted``, then the fewest free pods, then the first by values
        (``domains`` come in that order). One pass instead of a sort.
        """
        slices, pods = self.c.slices_wl, self.c.pods_wl
        best: Domain | None = None
        best_key = (INF, INF)
        for domain in domains:
            have = slices[domain.idx]
            if have >= wanted and (have, pods[domain.idx]) < best_key:
                best, best_key = domain, (have, pods[domain.idx])
        return best

    def _leader_first(
        self, domains: list[Domain], count: int, leader_count: int, slice_size: int, by_slices: bool
    ) -> list[Domain]:
        """Move first the first leader domain whose leader costs no capacity the pods need."""
        if leader_count == 0 or len(domains) < 2:
            return domains
        c = self.c
        needed = count // slice_size if by_slices else count
        counts = c.slices if by_slices else c.pods
        counts_wl = c.slices_wl if by_slices else c.pods_wl
        available = sum(counts[d.idx] for d in domains)
        for position, domain in enumerate(domains):
            if c.leaders[domain.idx] < leader_count:
                continue
            if available - (counts[domain.idx] - counts_wl[domain.idx]) < needed:
                continue
            if position == 0:
                return domains
            return [domain, *domains[:position], *domains[position + 1 :]]
        return domains

    # --------------------------------------------------------------- descend

    def _descend(self, chosen: list[Domain], level: int, plan: _Plan) -> list[Domain]:
        depth = len(self.snap.levels)
        current = self._minimum(chosen, plan.count, plan.leader_count, plan.slice_size, plan.least_free, True)
        while level < min(depth - 1, plan.slice_level):
            lower = self._sorted([child for d in current for child in d.children], plan.least_free)
            current = self._minimum(
                lower, plan.count, plan.leader_count, plan.slice_size, plan.least_free, True
            )
            level += 1
        c = self.c
        while level < depth - 1:
            size = plan.slice_size
            if level >= plan.slice_level:
                size = plan.slice_size_at.get(level + 1, 1)
            following: list[Domain] = []
            for domain in current:
                lower = self._sorted(domain.children, plan.least_free, by_values=True)
                if size > 1:
                    for child in lower:
                        c.slices[child.idx] = c.pods[child.idx] // size
                        c.slices_wl[child.idx] = c.pods_wl[child.idx] // size
                following.extend(
                    self._minimum(
                        lower, c.pods[domain.idx], c.leaders[domain.idx], size, plan.least_free, size > 1
                    )
                )
            current = following
            level += 1
        return current

    def _minimum(
        self,
        domains: list[Domain],
        count: int,
        leader_count: int,
        size: int,
        least_free: bool,
        by_slices: bool,
    ) -> list[Domain]:
        """Give ``count`` pods (and the leaders) to as few of ``domains`` as possible, in order."""
        c = self.c
        best_fit = not least_free
        domains = self._leader_first(domains, count, leader_count, size, by_slices)
        primary = c.slices if by_slices else c.pods
        primary_wl = c.slices_wl if by_slices else c.pods_wl
        unit = size if by_slices else 1
        left = count // size if by_slices else count
        leaders_left = leader_count
        result: list[Domain] = []
        for position, domain in enumerate(domains):
            if leaders_left > 0:
                if best_fit and primary_wl[domain.idx] >= left and c.leaders[domain.idx] >= leaders_left:
                    domain = self._best_fit(domains[position:], left, primary_wl, leaders_left)
                i = domain.idx
                result.append(domain)
                if primary_wl[i] >= left and c.leaders[i] >= leaders_left:
                    primary[i] = left
                    c.leaders[i] = leaders_left
                    c.pods[i] = left * unit
                    return result
                primary_wl[i] = min(primary_wl[i], left)
                c.leaders[i] = min(c.leaders[i], leaders_left)
                primary[i] = primary_wl[i]
                c.pods[i] = primary_wl[i] * unit
                leaders_left -= c.leaders[i]
                left -= primary_wl[i]
                continue
            if best_fit and primary[domain.idx] >= left:
                domain = self._best_fit(domains[position:], left, primary, 0)
            i = domain.idx
            c.leaders[i] = 0
            result.append(domain)
            if primary[i] >= left:
                primary[i] = left
                c.pods[i] = left * unit
                return result
            c.pods[i] = primary[i] * unit
            left -= primary[i]
        return result

    # ----------------------------------------------------------------- write

    def _write(self, placed: list[tuple[Domain, int]]) -> TopologyAssignment:
        snap = self.snap
        start = len(snap.levels) - 1 if snap.lowest_is_host else 0
        domains = tuple(
            DomainCount(domain.values[start:], count)
            for domain, count in sorted(placed, key=lambda item: item[0].values)
            if count > 0
        )
        return TopologyAssignment(snap.levels[start:], domains)

    # ---------------------------------------------------------------- report

    def _not_fit(self, level: int, plan: _Plan, fit: int, wanted: int) -> str:
        name = self.snap.topology
        if plan.layers:
            return self._layers_not_fit(level, plan)
        unit = "pod" if plan.slice_size == 1 else "slice"
        if fit == 0:
            text = f'topology "{name}" doesn\'t allow to fit any of {wanted} {unit}(s)'
        else:
            text = f'topology "{name}" allows to fit only {fit} out of {wanted} {unit}(s)'
        return text + self._exclusions()

    def _exclusions(self) -> str:
        if not self.stats.any():
            return ""
        return f". Total nodes: {self.stats.total}; excluded: {self.stats.text()}"

    def _layers_not_fit(self, level: int, plan: _Plan) -> str:
        c = self.c
        text = f'topology "{self.snap.topology}" doesn\'t allow to fit'
        domains = self.snap.per_level[level]
        if not domains:
            return text
        best = min(domains, key=lambda d: (-c.slices[d.idx], d.key))
        for topology, size in plan.layers:
            target = self.snap.level_index(topology)
            if target < 0:
                continue
            fit = self._slices_below(best, level, target, size)
            text += f"; {fit}/{plan.count // size} slice(s) fit on level {topology}"
        return text + self._exclusions()

    def _slices_below(self, domain: Domain, level: int, target: int, size: int) -> int:
        if level == target:
            return self.c.pods[domain.idx] // size
        return sum(self._slices_below(child, level + 1, target, size) for child in domain.children)
