"""Fair-sharing settings shared by ClusterQueue, Cohort and LocalQueue.

``weight`` is a quantity (``"0.5"``, ``"2"``) rather than a float so that shares are
compared exactly; upstream defaults it to 1 whenever ``fairSharing`` is given.
"""

from __future__ import annotations

from typing import Literal

from pykueue.api.meta import Int64, KubeModel, Quantity

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
AdmissionMode = Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]


class FairSharing(KubeModel):
    weight: Quantity | None = "1"


class FairSharingStatus(KubeModel):
    weighted_share: Int64 = 0


class AdmissionScope(KubeModel):
    admission_mode: AdmissionMode
