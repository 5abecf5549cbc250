"""Unknown fields inside the core types we read only in part: what the API server's strict
field validation (``kubectl apply --validate=strict``, the default) refuses.

The models of PodSpec, Container and JobSpec pass unmodelled fields through
(`meta.PassthroughModel`), so that real manifests load: a ``volumes`` or ``env`` is kept,
not refused. That also kept ``backofLimit``, ``parallelizm`` and ``comand``, which the
API server would have refused and which then did nothing at all. This module knows the
field names of every type of a Job, a JobSet, a Pod and a Workload's pod templates
(Kubernetes 1.34, JobSet v1alpha2) and names each unknown one with its path:

    spec.backofLimit: unknown field (did you mean backoffLimit?)
    spec.template.spec.containers[0].comand: unknown field (did you mean command?)

Only names are checked here; values are the models' (and the API server's) business.
The volume sources of in-tree cloud and storage drivers (gcePersistentDisk, rbd, ...)
are checked by name, not inside. A type marked open (``~``) is a Kueue model that refuses
unknown fields itself: only the listed fields are followed, towards pod templates.
Used where objects are submitted (`pykueue apply`, `pykueue validate`), not where they
are read back from an API server that may know newer fields than this table.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Final

from pykueue.errors import FieldProblem

# Type: "field field:Type ...". A field without a type is a value, a list of values or a
# map of any keys (labels, requests): not looked into.
_TYPES: Final = {
    # roots, by kind
    "Job": "apiVersion kind metadata:ObjectMeta spec:JobSpec status",
    "JobSet": "apiVersion kind metadata:ObjectMeta spec:JobSetSpec status",
    "Pod": "apiVersion kind metadata:ObjectMeta spec:PodSpec status",
    "~Workload": "spec:WorkloadSpec",
    "~WorkloadSpec": "podSets:PodSet",
    "~PodSet": "template:PodTemplateSpec",
    # meta/v1
    "ObjectMeta": "name generateName namespace selfLink uid resourceVersion generation creationTimestamp "
    "deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences:OwnerReference "
    "finalizers managedFields",
    "OwnerReference": "apiVersion kind name uid controller blockOwnerDeletion",
    "LabelSelector": "matchLabels matchExpressions:LabelSelectorRequirement",
    "LabelSelectorRequirement": "key operator values",
    # batch/v1
    "JobSpec": "parallelism completions activeDeadlineSeconds podFailurePolicy:PodFailurePolicy "
    "successPolicy:JobSuccessPolicy backoffLimit backoffLimitPerIndex maxFailedIndexes "
    "selector:LabelSelector manualSelector template:PodTemplateSpec ttlSecondsAfterFinished "
    "completionMode suspend podReplacementPolicy managedBy",
    "PodFailurePolicy": "rules:PodFailurePolicyRule",
    "PodFailurePolicyRule": "action onExitCodes:PodFailurePolicyOnExitCodes onPodConditions:PodFailurePolicyOnPodConditions",
    "PodFailurePolicyOnExitCodes": "containerName operator values",
    "PodFailurePolicyOnPodConditions": "type status",
    "JobSuccessPolicy": "rules:JobSuccessPolicyRule",
    "JobSuccessPolicyRule": "succeededIndexes succeededCount",
    # jobset.x-k8s.io/v1alpha2
    "JobSetSpec": "replicatedJobs:ReplicatedJob network:JobSetNetwork successPolicy:JobSetSuccessPolicy "
    "failurePolicy:JobSetFailurePolicy startupPolicy:JobSetStartupPolicy suspend coordinator:JobSetCoordinator "
    "managedBy ttlSecondsAfterFinished volumeClaimPolicies",
    "ReplicatedJob": "name groupName template:JobTemplateSpec replicas dependsOn:JobSetDependsOn",
    "JobTemplateSpec": "metadata:ObjectMeta spec:JobSpec",
    "JobSetDependsOn": "name status",
    "JobSetNetwork": "enableDNSHostnames subdomain publishNotReadyAddresses",
    "JobSetSuccessPolicy": "operator targetReplicatedJobs",
    "JobSetFailurePolicy": "maxRestarts restartStrategy rules:JobSetFailurePolicyRule",
    "JobSetFailurePolicyRule": "name action onJobFailureReasons onJobFailureMessagePatterns targetReplicatedJobs",
    "JobSetStartupPolicy": "startupPolicyOrder",
    "JobSetCoordinator": "replicatedJob jobIndex podIndex",
    # core/v1: the pod
    "PodTemplateSpec": "metadata:ObjectMeta spec:PodSpec",
    "PodSpec": "volumes:Volume initContainers:Container containers:Container "
    "ephemeralContainers:EphemeralContainer restartPolicy terminationGracePeriodSeconds "
    "activeDeadlineSeconds dnsPolicy nodeSelector serviceAccountName serviceAccount "
    "automountServiceAccountToken nodeName hostNetwork hostPID hostIPC shareProcessNamespace "
    "securityContext:PodSecurityContext imagePullSecrets:LocalObjectReference hostname subdomain "
    "affinity:Affinity schedulerName tolerations:Toleration hostAliases:HostAlias priorityClassName "
    "priority dnsConfig:PodDNSConfig readinessGates:PodReadinessGate runtimeClassName enableServiceLinks "
    "preemptionPolicy overhead topologySpreadConstraints:TopologySpreadConstraint setHostnameAsFQDN "
    "os:PodOS hostUsers schedulingGates:PodSchedulingGate resourceClaims:PodResourceClaim "
    "resources:ResourceRequirements hostnameOverride",
    "Container": "name image command args workingDir ports:ContainerPort envFrom:EnvFromSource env:EnvVar "
    "resources:ResourceRequirements resizePolicy:ContainerResizePolicy restartPolicy restartPolicyRules "
    "volumeMounts:VolumeMount volumeDevices:VolumeDevice livenessProbe:Probe readinessProbe:Probe "
    "startupProbe:Probe lifecycle:Lifecycle terminationMessagePath terminationMessagePolicy "
    "imagePullPolicy securityContext:SecurityContext stdin stdinOnce tty",
    "ContainerPort": "name hostPort containerPort protocol hostIP",
    "EnvFromSource": "prefix configMapRef:OptionalReference secretRef:OptionalReference",
    "OptionalReference": "name optional",
    "EnvVar": "name value valueFrom:EnvVarSource",
    "EnvVarSource": "fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector "
    "configMapKeyRef:KeySelector secretKeyRef:KeySelector fileKeyRef:FileKeySelector",
    "ObjectFieldSelector": "apiVersion fieldPath",
    "ResourceFieldSelector": "containerName resource divisor",
    "KeySelector": "name key optional",
    "FileKeySelector": "volumeName path key optional",
    "ResourceRequirements": "limits requests claims:ResourceClaim",
    "ResourceClaim": "name request",
    "ContainerResizePolicy": "resourceName restartPolicy",
    "VolumeMount": "name readOnly recursiveReadOnly mountPath subPath mountPropagation subPathExpr",
    "VolumeDevice": "name devicePath",
    "Probe": "exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction grpc:GRPCAction "
    "initialDelaySeconds timeoutSeconds periodSeconds successThreshold failureThreshold "
    "terminationGracePeriodSeconds",
    "ExecAction": "command",
    "HTTPGetAction": "path port host scheme httpHeaders:HTTPHeader",
    "HTTPHeader": "name value",
    "TCPSocketAction": "port host",
    "GRPCAction": "port service",
    "Lifecycle": "postStart:LifecycleHandler preStop:LifecycleHandler stopSignal",
    "LifecycleHandler": "exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction sleep:SleepAction",
    "SleepAction": "seconds",
    "SecurityContext": "capabilities:Capabilities privileged seLinuxOptions:SELinuxOptions "
    "windowsOptions:WindowsSecurityContextOptions runAsUser runAsGroup runAsNonRoot "
    "readOnlyRootFilesystem allowPrivilegeEscalation procMount seccompProfile:SeccompProfile "
    "appArmorProfile:SeccompProfile",
    "PodSecurityContext": "seLinuxOptions:SELinuxOptions windowsOptions:WindowsSecurityContextOptions "
    "runAsUser runAsGroup runAsNonRoot supplementalGroups supplementalGroupsPolicy fsGroup "
    "sysctls:Sysctl fsGroupChangePolicy seccompProfile:SeccompProfile appArmorProfile:SeccompProfile "
    "seLinuxChangePolicy",
    "Capabilities": "add drop",
    "SELinuxOptions": "user role type level",
    "WindowsSecurityContextOptions": "gmsaCredentialSpecName gmsaCredentialSpec runAsUserName hostProcess",
    "SeccompProfile": "type localhostProfile",
    "Sysctl": "name value",
    "LocalObjectReference": "name",
    "Affinity": "nodeAffinity:NodeAffinity podAffinity:PodAffinity podAntiAffinity:PodAffinity",
    "NodeAffinity": "requiredDuringSchedulingIgnoredDuringExecution:NodeSelector "
    "preferredDuringSchedulingIgnoredDuringExecution:PreferredSchedulingTerm",
    "NodeSelector": "nodeSelectorTerms:NodeSelectorTerm",
    "NodeSelectorTerm": "matchExpressions:NodeSelectorRequirement matchFields:NodeSelectorRequirement",
    "NodeSelectorRequirement": "key operator values",
    "PreferredSchedulingTerm": "weight preference:NodeSelectorTerm",
    "PodAffinity": "requiredDuringSchedulingIgnoredDuringExecution:PodAffinityTerm "
    "preferredDuringSchedulingIgnoredDuringExecution:WeightedPodAffinityTerm",
    "PodAffinityTerm": "labelSelector:LabelSelector namespaces topologyKey namespaceSelector:LabelSelector "
    "matchLabelKeys mismatchLabelKeys",
    "WeightedPodAffinityTerm": "weight podAffinityTerm:PodAffinityTerm",
    "Toleration": "key operator value effect tolerationSeconds",
    "HostAlias": "ip hostnames",
    "PodDNSConfig": "nameservers searches options:PodDNSConfigOption",
    "PodDNSConfigOption": "name value",
    "PodReadinessGate": "conditionType",
    "TopologySpreadConstraint": "maxSkew topologyKey whenUnsatisfiable labelSelector:LabelSelector "
    "minDomains nodeAffinityPolicy nodeTaintsPolicy matchLabelKeys",
    "PodOS": "name",
    "PodSchedulingGate": "name",
    "PodResourceClaim": "name resourceClaimName resourceClaimTemplateName",
    # core/v1: volumes
    "Volume": "name hostPath:HostPathVolumeSource emptyDir:EmptyDirVolumeSource secret:SecretVolumeSource "
    "configMap:ConfigMapVolumeSource persistentVolumeClaim:PersistentVolumeClaimVolumeSource "
    "nfs:NFSVolumeSource downwardAPI:DownwardAPIVolumeSource projected:ProjectedVolumeSource "
    "csi:CSIVolumeSource ephemeral:EphemeralVolumeSource image:ImageVolumeSource "
    "gcePersistentDisk awsElasticBlockStore gitRepo iscsi glusterfs rbd flexVolume cinder cephfs flocker "
    "fc azureFile vsphereVolume quobyte azureDisk photonPersistentDisk portworxVolume scaleIO storageos",
    "HostPathVolumeSource": "path type",
    "EmptyDirVolumeSource": "medium sizeLimit",
    "SecretVolumeSource": "secretName items:KeyToPath defaultMode optional",
    "ConfigMapVolumeSource": "name items:KeyToPath defaultMode optional",
    "KeyToPath": "key path mode",
    "PersistentVolumeClaimVolumeSource": "claimName readOnly",
    "NFSVolumeSource": "server path readOnly",
    "DownwardAPIVolumeSource": "items:DownwardAPIVolumeFile defaultMode",
    "DownwardAPIVolumeFile": "path fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector mode",
    "ProjectedVolumeSource": "sources:VolumeProjection defaultMode",
    "VolumeProjection": "secret:ProjectedKeys configMap:ProjectedKeys downwardAPI:DownwardAPIProjection "
    "serviceAccountToken:ServiceAccountTokenProjection clusterTrustBundle podCertificate",
    "ProjectedKeys": "name items:KeyToPath optional",
    "DownwardAPIProjection": "items:DownwardAPIVolumeFile",
    "ServiceAccountTokenProjection": "audience expirationSeconds path",
    "CSIVolumeSource": "driver readOnly fsType volumeAttributes nodePublishSecretRef:LocalObjectReference",
    "EphemeralVolumeSource": "volumeClaimTemplate",
    "ImageVolumeSource": "reference pullPolicy",
}


def _parse(table: Mapping[str, str]) -> tuple[dict[str, dict[str, str | None]], frozenset[str]]:
    types: dict[str, dict[str, str | None]] = {}
    open_types = set()
    for name, text in table.items():
        if name.startswith("~"):
            name = name[1:]
            open_types.add(name)
        fields: dict[str, str | None] = {}
        for word in text.split():
            field, _, type_name = word.partition(":")
            fields[field] = type_name or None
        types[name] = fields
    types["EphemeralContainer"] = {**types["Container"], "targetContainerName": None}
    return types, frozenset(open_types)


TYPES, OPEN = _parse(_TYPES)
ROOTS: Final = {"Job": "Job", "JobSet": "JobSet", "Pod": "Pod", "Workload": "Workload"}


def problems(doc: Mapping[str, Any]) -> list[FieldProblem]:
    """Every unknown field of ``doc`` (a decoded manifest of a kind above), with its path."""
    root = ROOTS.get(str(doc.get("kind")))
    found: list[FieldProblem] = []
    if root is not None:
        _walk(doc, root, "", found)
    return found


def _walk(value: Any, type_name: str, path: str, out: list[FieldProblem]) -> None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, type_name, f"{path}[{index}]", out)
        return
    if not isinstance(value, Mapping):
        return  # a value of the wrong shape: the model says so
    fields = TYPES[type_name]
    for key, item in value.items():
        name = str(key)
        where = f"{path}.{name}" if path else name
        if name in fields:
            child = fields[name]
            if child is not None:
                _walk(item, child, where, out)
        elif type_name not in OPEN:
            out.append(FieldProblem(where, _unknown(name, fields)))


def _unknown(name: str, fields: Mapping[str, str | None]) -> str:
    close = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.75)
    return f"unknown field (did you mean {close[0]}?)" if close else "unknown field"


def merge(unknown: list[FieldProblem], others: list[FieldProblem]) -> list[FieldProblem]:
    """``others`` with ``unknown`` added, each unknown field named once (a model refusing it
    too says only "unknown field")."""
    named = {p.path for p in unknown}
    kept = [p for p in others if not (p.path in named and p.message.startswith("unknown field"))]
    return [*unknown, *kept]
