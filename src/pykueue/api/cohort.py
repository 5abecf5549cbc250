"""Cohort: a node of the borrowing tree.

ClusterQueues join a cohort by ``spec.cohortName``; cohorts nest by ``parentName``.
A cohort may hold quota of its own (``resourceGroups``, same shape as a
ClusterQueue's) that its members can borrow. Upstream does not refuse a cycle of
parents at the API level (the members of a cycle are deactivated until it is
broken), and neither do we: that is a property of the whole set of objects, which
the engine checks.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.cluster_queue import MAX_RESOURCE_GROUPS, ResourceGroup
from pykueue.api.fair_sharing import FairSharing, FairSharingStatus
from pykueue.api.meta import DNSSubdomain, KubeModel, ObjectMeta


class CohortSpec(KubeModel):
    """The cohort's place in the tree and the quota it holds itself."""

    parent_name: DNSSubdomain = Field("", description="The parent Cohort, for a tree of cohorts.")
    resource_groups: list[ResourceGroup] = Field(
        default_factory=list,
        max_length=MAX_RESOURCE_GROUPS,
        description="Quota the cohort holds itself, shared by every queue below it.",
    )
    fair_sharing: FairSharing | None = Field(
        None, description="This cohort's weight in fair sharing among its siblings."
    )


class CohortStatus(KubeModel):
    fair_sharing: FairSharingStatus | None = None


class Cohort(KubeModel):
    """A group of ClusterQueues (and child cohorts) that lend and borrow unused quota; cluster-scoped."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["Cohort"] = "Cohort"
    metadata: ObjectMeta
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus = Field(default_factory=CohortStatus)
