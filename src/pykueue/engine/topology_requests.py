"""What a pod set asks of the topology: a level its pods must or should share, slices, groups.

A Workload states it in ``spec.podSets[].topologyRequest``; a job written for
Kubernetes states it in annotations of its pod template, which upstream's job
integrations turn into that field. A pod set without either asks nothing,
unless its ClusterQueue has only topology-aware flavors: then its pods are
placed anyway, one pod per slice at the lowest level (the *implied* request).

The v1beta1 and v1beta2 annotation names are the same strings; only the
multi-layer constraints annotation is v1beta2's alone (TASMultiLayerTopology).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pykueue.api.workload import PodSet as ApiPodSet

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
ANNOTATIONS = (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS, GROUP_NAME)
MAX_SLICE_LAYERS = 3


class TopologyRequestError(ValueError):
    """A topology annotation that cannot be read (the message names the annotation)."""


@dataclass(frozen=True, slots=True)
class SliceLayer:
    """Pods are grouped by ``size``; each group must share one domain of level ``topology``."""

    topology: str
    size: int


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    required: str | None = None
    preferred: str | None = None
    # None: not stated. Stated as false it still makes the pod set ask for TAS explicitly.
    unconstrained: bool | None = None
    slices: tuple[SliceLayer, ...] = ()
    group: str | None = None

    def explicit(self) -> bool:
        """Does the pod set ask for topology-aware scheduling itself (upstream's rule)?"""
        return (
            self.required is not None
            or self.preferred is not None
            or self.unconstrained is not None
            or bool(self.slices)
        )

    def slice_only(self) -> bool:
        """Slices without a level for the whole pod set: placed as unconstrained."""
        return self.required is None and self.preferred is None and bool(self.slices)

    def is_unconstrained(self) -> bool:
        return bool(self.unconstrained) or self.slice_only()

    def placement_level(self, levels: tuple[str, ...]) -> str | None:
        """The level the whole pod set is placed at, among a topology's ``levels`` (top
        first): the one required or preferred, the top for slices alone, the bottom when
        unconstrained; None when it asks for no topology."""
        if self.required is not None:
            return self.required
        if self.preferred is not None:
            return self.preferred
        if self.slice_only():
            return levels[0]
        if self.unconstrained:
            return levels[-1]
        return None

    def levels(self) -> tuple[str, ...]:
        """Every level named, to check a flavor's topology has them all."""
        named = [x for x in (self.required, self.preferred) if x is not None]
        named.extend(layer.topology for layer in self.slices)
        return tuple(named)


def from_pod_set(ps: ApiPodSet, multi_layer: bool = True) -> TopologyRequest | None:
    """The pod set's request: its ``topologyRequest`` field, else its template's annotations."""
    if ps.topology_request is not None:
        tr = ps.topology_request
        layers: tuple[SliceLayer, ...] = tuple(
            SliceLayer(c.topology, c.size) for c in tr.podset_slice_required_topology_constraints
        )
        if not layers and tr.pod_set_slice_required_topology is not None:
            layers = (SliceLayer(tr.pod_set_slice_required_topology, tr.pod_set_slice_size or 0),)
        request = TopologyRequest(tr.required, tr.preferred, tr.unconstrained, layers, tr.pod_set_group_name)
        return request if request.explicit() or request.group else None
    return from_annotations(ps.template.metadata.annotations, multi_layer)


def from_annotations(annotations: Mapping[str, str], multi_layer: bool = True) -> TopologyRequest | None:
    """Upstream's reading of the pod template annotations (jobframework's request builder)."""
    required = annotations.get(REQUIRED)
    preferred = annotations.get(PREFERRED) if required is None else None
    unconstrained: bool | None = None
    if required is None and preferred is None and UNCONSTRAINED in annotations:
        unconstrained = _parse_bool(annotations[UNCONSTRAINED])
    layers = _slice_layers(annotations, multi_layer)
    if required is None and preferred is None and unconstrained is None and not layers:
        return None
    group = annotations.get(GROUP_NAME) if (required is not None or preferred is not None) else None
    return TopologyRequest(required, preferred, unconstrained, layers, group)


def _slice_layers(annotations: Mapping[str, str], multi_layer: bool) -> tuple[SliceLayer, ...]:
    if multi_layer and SLICE_CONSTRAINTS in annotations:
        return _constraints(annotations[SLICE_CONSTRAINTS])
    if SLICE_REQUIRED in annotations and SLICE_SIZE in annotations:
        text = annotations[SLICE_SIZE]
        try:
            size = int(text)
        except ValueError:
            raise TopologyRequestError(f"annotation {SLICE_SIZE}: {text!r} is not an integer") from None
        return (SliceLayer(annotations[SLICE_REQUIRED], size),)
    return ()


def _constraints(text: str) -> tuple[SliceLayer, ...]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TopologyRequestError(f"annotation {SLICE_CONSTRAINTS}: not JSON ({exc.msg})") from None
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SLICE_LAYERS:
        raise TopologyRequestError(
            f"annotation {SLICE_CONSTRAINTS}: must be a list of 1 to {MAX_SLICE_LAYERS} {{topology, size}}"
        )
    layers = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("topology"), str):
            raise TopologyRequestError(f"annotation {SLICE_CONSTRAINTS}[{index}]: needs topology and size")
        size = item.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise TopologyRequestError(
                f"annotation {SLICE_CONSTRAINTS}[{index}].size: must be a positive integer"
            )
        layers.append(SliceLayer(item["topology"], size))
    return tuple(layers)


def _parse_bool(text: str) -> bool:
    # Go's strconv.ParseBool, which upstream uses for this annotation.
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise TopologyRequestError(f"annotation {UNCONSTRAINED}: {text!r} is not a boolean")
