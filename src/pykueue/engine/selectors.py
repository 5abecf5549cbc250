"""Label selectors, node affinity and taints: the matching rules Kubernetes uses.

These decide whether a Namespace matches a ClusterQueue's namespaceSelector
and whether a ResourceFlavor's nodes could host a pod set (its nodeSelector,
required node affinity and tolerations against the flavor's labels and taints).
Each check returns a human reason when it fails, because the engine must say
why a flavor was skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Requirement:
    """One expression of a label selector or node selector term."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({', '.join(self.values)})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector; the empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(key) != value for key, value in self.match_labels):
            return False
        return all(req.matches(labels) for req in self.expressions)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of required node affinity: all its expressions must hold.

    ``fields`` are its ``matchFields`` (Kubernetes allows only ``metadata.name``): a flavor
    has no node name, so choosing a flavor reads the expressions only (`matches`), as
    upstream's flavor assigner does; topology placement, on real nodes, reads both
    (`matches_node`), as upstream's does.
    """

    expressions: tuple[Requirement, ...] = field(default_factory=tuple)
    fields: tuple[Requirement, ...] = field(default_factory=tuple)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req.matches(labels) for req in self.expressions)

    def matches_node(self, labels: Mapping[str, str], name: str) -> bool:
        if not self.matches(labels):
            return False
        return all(req.matches({"metadata.name": name}) for req in self.fields)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{{{self.key}{value}:{self.effect}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration covers, if any."""
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def flavor_affinity_mismatch(
    flavor_labels: Mapping[str, str],
    node_selector: Mapping[str, str],
    affinity_terms: Sequence[NodeSelectorTerm] | None,
) -> str:
    """Why a flavor's node labels cannot satisfy a pod's placement, or "" when they can.

    As upstream, only the label keys the flavor defines are compared: a pod
    may select on other labels (a zone, a hostname) that kube-scheduler alone
    decides on.
    """
    for key, value in node_selector.items():
        if key in flavor_labels and flavor_labels[key] != value:
            return f"nodeSelector {key}={value} does not match the flavor's label {key}={flavor_labels[key]}"
    if not affinity_terms:
        return ""
    relevant: list[NodeSelectorTerm] = []
    for term in affinity_terms:
        kept = tuple(req for req in term.expressions if req.key in flavor_labels)
        if not kept:
            return ""  # a term with no flavor key can be satisfied by some node of the flavor
        relevant.append(NodeSelectorTerm(kept))
    if any(term.matches(flavor_labels) for term in relevant):
        return ""
    wanted = " or ".join("; ".join(str(req) for req in term.expressions) for term in relevant)
    return f"required node affinity ({wanted}) does not match the flavor's labels"
