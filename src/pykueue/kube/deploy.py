"""Everything a cluster needs to run pykueue, as manifests: what `pykueue manifests` prints.

    namespace ─ CRDs (conversion via the webhook Service) ─ RBAC ─ webhook Secret
    ─ Mutating/ValidatingWebhookConfigurations ─ Service ─ visibility APIServices ─ Deployment
    [─ metrics Service (with a metrics port) ─ ServiceMonitor (if asked for)]

Least privilege, rule by rule (nothing with ``*``):

| what | verbs | why |
| --- | --- | --- |
| Kueue kinds | get list watch | the informers |
| workloads | + create update patch delete | one Workload per Job, owned by it |
| clusterqueues, localqueues, cohorts, workloads, admissionchecks ``/status`` | get update patch | queue, workload and check status |
| batch jobs | get list watch update patch | suspend / resume, inject node selectors |
| jobs/finalizers, workloads/finalizers | update | owner references with ``blockOwnerDeletion`` |
| pods | get list watch update patch | pods-ready, partial admission; node capacity and ungating (TAS) |
| nodes | get list watch | topology-aware scheduling: the nodes' labels and capacity |
| pods/status | get update patch | a TAS workload's pod on a failed node marked Failed |
| podtemplates, autoscaling.x-k8s.io provisioningrequests | + create update (patch) delete | the ProvisioningRequest admission check |
| namespaces, limitranges, priorityclasses | get list watch | selectors, defaults, priorities |
| events (core and events.k8s.io) | create patch | the events we write |
| our two webhook configurations (by name) | get update patch | publish the CA bundle |
| our CRDs (by name) | get update patch | the conversion webhook's CA bundle |
| leases in our namespace | get list watch create update patch | leader election |
| configmaps in our namespace | get list watch create delete | policy history: one ConfigMap per revision |
| tokenreviews, subjectaccessreviews | create | who may read the visibility API |
| the visibility APIServices (by name) | get update patch | publish the CA bundle |
| ConfigMap ``kube-system/extension-apiserver-authentication`` (the built-in Role ``extension-apiserver-authentication-reader``, bound in ``kube-system``) | get list watch | trust the API server's front proxy (visibility API) |
| our certificate Secret in our namespace (by name) | get update patch | the serving certificate |

The Secret is part of the manifests (empty), so the controller never needs ``create``
on Secrets. The Deployment runs as a non-root user on a read-only root file system
(``/tmp`` is an emptyDir for the certificate files), without privilege escalation or
capabilities; its probes are the webhook server's ``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Final

from pykueue.api import crd
from pykueue.kube import certs, webhooks
from pykueue.reconcilers import integrations, jobframework
from pykueue.views import visibility

Doc = dict[str, Any]

NAME: Final = "pykueue"
MANAGER_ROLE: Final = "pykueue-manager-role"
SERVICE_ACCOUNT: Final = "pykueue-controller-manager"
DEFAULT_IMAGE: Final = "ghcr.io/pykueue/pykueue:0.1.0"
_CERTS: Final = certs.CertConfig()
MUTATING_WEBHOOK: Final = _CERTS.mutating_webhook
VALIDATING_WEBHOOK: Final = _CERTS.validating_webhook
SECRET: Final = _CERTS.secret_name
SERVICE: Final = _CERTS.service_name
LABELS: Final = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "controller"}
KUEUE_PLURALS: Final = tuple(kind.plural for kind in crd.KINDS)
# admissionchecks: the ProvisioningRequest and MultiKueue checks keep their Active condition;
# multikueueclusters: MultiKueue writes whether each worker answers.
STATUS_WRITTEN: Final = (
    "clusterqueues",
    "localqueues",
    "cohorts",
    "workloads",
    "admissionchecks",
    "multikueueclusters",
)
CONFIG_MAP: Final = "pykueue-manager-config"
CONFIG_KEY: Final = "controller_manager_config.yaml"
CONFIG_MOUNT: Final = "/etc/pykueue"


@dataclass(frozen=True)
class DeployConfig:
    """What varies between installations."""

    namespace: str = "kueue-system"
    image: str = DEFAULT_IMAGE
    # 0: as many as the controller can use, two with leader election (a leader and a warm
    # standby), else one (two replicas without a lease would both write).
    replicas: int = 0
    webhook_port: int = 9443
    # The controller process: `pykueue controller` with its webhook server on.
    args: tuple[str, ...] = ("controller", "--webhooks", "--webhook-port=9443")
    # Operations, opt-in (`pykueue manifests --metrics-port N --leader-elect --service-monitor`):
    # the plain-HTTP port of /metrics, /healthz, /readyz and the visibility API (0: none; the
    # probes stay on the webhook port), leader election, and a Prometheus Operator
    # ServiceMonitor for that port (only with a metrics port).
    metrics_port: int = 0
    leader_elect: bool = False
    service_monitor: bool = False
    # The job kinds managed (the configuration's integrations.frameworks): their RBAC and
    # their rules in the job webhook.
    frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS
    # The controller's Configuration file (upstream's kind, as a YAML text), mounted from a
    # ConfigMap and passed as --config; empty: none (the controller's defaults).
    configuration: str = ""

    def replica_count(self) -> int:
        if self.replicas:
            return self.replicas
        return 2 if self.leader_elect else 1

    def controller_args(self) -> list[str]:
        args = list(self.args)
        if self.configuration:
            args.append(f"--config={CONFIG_MOUNT}/{CONFIG_KEY}")
        if self.metrics_port:
            args.append(f"--metrics-port={self.metrics_port}")
        if self.leader_elect:
            args.append("--leader-elect")
        return args

    def webhook_client(self, ca_bundle: bytes = b"") -> crd.WebhookClientConfig:
        return crd.WebhookClientConfig(
            service_namespace=self.namespace, service_name=SERVICE, service_port=443, ca_bundle=ca_bundle
        )


# `kubectl apply --server-side`'s own default field manager: an install followed by the
# documented `kubectl apply --server-side -f pykueue.yaml` (or the other way round) is one
# manager changing its own fields, never a conflict.
INSTALL_FIELD_MANAGER = "kubectl"


def _meta(name: str, namespace: str = "") -> Doc:
    meta: Doc = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _rule(groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None) -> Doc:
    rule: Doc = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


_READ: Final = ["get", "list", "watch"]


def enabled(frameworks: tuple[str, ...]) -> list[jobframework.Integration]:
    known = integrations.by_name()
    return [known[name] for name in frameworks if name in known]


def _job_kind_rules(frameworks: tuple[str, ...]) -> list[Doc]:
    """Per managed kind: read and hold it, its status (startTime, gates), its finalizers."""
    rules: list[Doc] = []
    for integration in enabled(frameworks):
        if integration.name == integrations.BATCH_JOB:
            continue  # written out below with the reason for each grant
        group = [integration.group]
        if integration.adapter is None:
            # Queued through its pods: read only (a LeaderWorkerSet's spec names its groups' pod sets).
            rules.append(_rule(group, [integration.plural], ["get"]))
            continue
        # Pods are stopped by deleting them (their owner, if any, makes new ones).
        extra = ["delete"] if integration.composable else []
        rules.append(_rule(group, [integration.plural], [*_READ, "update", "patch", *extra]))
        rules.append(_rule(group, [f"{integration.plural}/status"], ["get", "update", "patch"]))
        rules.append(_rule(group, [f"{integration.plural}/finalizers"], ["update"]))
    return rules


def _runtime_rules(frameworks: tuple[str, ...]) -> list[Doc]:
    """A TrainJob's pod sets are its runtime's: they are read (trainer.kubeflow.org/trainjob only)."""
    if "trainer.kubeflow.org/trainjob" not in frameworks:
        return []
    return [_rule(["trainer.kubeflow.org"], ["trainingruntimes", "clustertrainingruntimes"], ["get"])]


def cluster_role(frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS) -> Doc:
    others = [p for p in KUEUE_PLURALS if p != "workloads"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(MANAGER_ROLE),
        "rules": [
            _rule([crd.GROUP], others, _READ),
            _rule([crd.GROUP], ["workloads"], [*_READ, "create", "update", "patch", "delete"]),
            _rule([crd.GROUP], [f"{p}/status" for p in STATUS_WRITTEN], ["get", "update", "patch"]),
            _rule([crd.GROUP], ["workloads/finalizers"], ["update"]),
            _rule(["batch"], ["jobs"], [*_READ, "update", "patch"]),
            _rule(["batch"], ["jobs/finalizers"], ["update"]),
            # A stopped Job's startTime must be cleared before its template can be restored.
            _rule(["batch"], ["jobs/status"], ["get", "update", "patch"]),
            *_job_kind_rules(frameworks),
            # Update: the topology ungater sets a gated pod's nodeSelector and removes its gate.
            _rule([""], ["pods"], [*_READ, "update", "patch"]),
            _rule([""], ["nodes"], _READ),
            # A pod on a failed node under a TAS workload is marked Failed, to be replaced.
            _rule([""], ["pods/status"], ["get", "update", "patch"]),
            # The ProvisioningRequest admission check: one request and its PodTemplates per attempt.
            _rule([""], ["podtemplates"], [*_READ, "create", "update", "delete"]),
            _rule(
                ["autoscaling.x-k8s.io"],
                ["provisioningrequests"],
                [*_READ, "create", "update", "patch", "delete"],
            ),
            _rule([""], ["namespaces", "limitranges"], _READ),
            _rule(["scheduling.k8s.io"], ["priorityclasses"], _READ),
            # DRA: the devices a pod's ResourceClaimTemplates ask for are charged as quota.
            _rule(["resource.k8s.io"], ["resourceclaimtemplates"], ["get"]),
            *_runtime_rules(frameworks),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch"]),
            # The visibility API asks the API server who a caller is and what they may read.
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
            _rule(
                ["admissionregistration.k8s.io"],
                ["mutatingwebhookconfigurations"],
                ["get", "update", "patch"],
                [MUTATING_WEBHOOK],
            ),
            _rule(
                ["admissionregistration.k8s.io"],
                ["validatingwebhookconfigurations"],
                ["get", "update", "patch"],
                [VALIDATING_WEBHOOK],
            ),
            _rule(
                ["apiextensions.k8s.io"],
                ["customresourcedefinitions"],
                ["get", "update", "patch"],
                crd.crd_names(),
            ),
            _rule(
                ["apiregistration.k8s.io"],
                ["apiservices"],
                ["get", "update", "patch"],
                list(_CERTS.api_services),
            ),
        ],
    }


def namespace_role(config: DeployConfig) -> Doc:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta("pykueue-leader-election-and-certs", config.namespace),
        "rules": [
            _rule(["coordination.k8s.io"], ["leases"], [*_READ, "create", "update", "patch"]),
            _rule([""], ["configmaps"], [*_READ, "create", "delete"]),
            _rule([""], ["secrets"], ["get", "update", "patch"], [SECRET]),
        ],
    }


def rbac(config: DeployConfig) -> list[Doc]:
    """ServiceAccount, ClusterRole(+Binding), Role(+Binding) in our namespace."""
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": config.namespace}]
    role = namespace_role(config)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(SERVICE_ACCOUNT, config.namespace)},
        cluster_role(config.frameworks),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta("pykueue-manager-rolebinding"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MANAGER_ROLE},
            "subjects": subject,
        },
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta("pykueue-leader-election-and-certs", config.namespace),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role["metadata"]["name"],
            },
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            # Upstream's visibility server is bound the same way: the Role is built in.
            "metadata": _meta("pykueue-visibility-server-auth-reader", "kube-system"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "extension-apiserver-authentication-reader",
            },
            "subjects": subject,
        },
    ]


# --- user-facing roles -----------------------------------------------------------------------

# Upstream's names (its kustomize prefix ``kueue-``), so RoleBindings written for upstream's
# roles keep working.
ROLE_PREFIX: Final = "kueue-"
_AGGREGATE: Final = "rbac.authorization.k8s.io/aggregate-to-"
_BATCH_ADMIN: Final = "rbac.kueue.x-k8s.io/batch-admin"
_BATCH_USER: Final = "rbac.kueue.x-k8s.io/batch-user"
_EDIT: Final = ["create", "delete", "get", "list", "patch", "update", "watch"]
VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"


@dataclass(frozen=True)
class UserRole:
    """One of upstream's end-user ClusterRoles and where it is aggregated."""

    name: str  # without the prefix, e.g. "localqueue-viewer"
    group: str
    resource: str
    verbs: tuple[str, ...]
    status: bool  # also get on <resource>/status
    batch_user: bool  # in kueue-batch-user-role (every one is in kueue-batch-admin-role)
    aggregate_to: tuple[str, ...]  # of the built-in view, edit, admin


_NAMESPACE_FACING: Final = ("view", "edit", "admin")
USER_ROLES: Final = (
    # Namespaced things a tenant works with: readable by view/edit/admin of the namespace.
    UserRole("localqueue-viewer", crd.GROUP, "localqueues", tuple(_READ), True, True, _NAMESPACE_FACING),
    UserRole("localqueue-editor", crd.GROUP, "localqueues", tuple(_EDIT), True, False, ()),
    UserRole("workload-viewer", crd.GROUP, "workloads", tuple(_READ), True, True, _NAMESPACE_FACING),
    UserRole("workload-editor", crd.GROUP, "workloads", tuple(_EDIT), True, False, ()),
    UserRole("job-viewer", "batch", "jobs", tuple(_READ), True, True, _NAMESPACE_FACING),
    UserRole("job-editor", "batch", "jobs", tuple(_EDIT), True, True, ()),
    UserRole(
        "pending-workloads-lq-viewer",
        VISIBILITY_GROUP,
        "localqueues/pendingworkloads",
        tuple(_READ),
        False,
        True,
        _NAMESPACE_FACING,
    ),
    UserRole(
        "pending-workloads-cq-viewer",
        VISIBILITY_GROUP,
        "clusterqueues/pendingworkloads",
        tuple(_READ),
        False,
        False,
        _NAMESPACE_FACING,
    ),
    # Cluster-scoped queue configuration: read by a namespace admin, written by batch admins.
    UserRole("clusterqueue-viewer", crd.GROUP, "clusterqueues", tuple(_READ), True, False, ("admin",)),
    UserRole("clusterqueue-editor", crd.GROUP, "clusterqueues", tuple(_EDIT), True, False, ()),
    UserRole("cohort-viewer", crd.GROUP, "cohorts", tuple(_READ), False, False, ("admin",)),
    UserRole("cohort-editor", crd.GROUP, "cohorts", tuple(_EDIT), False, False, ()),
    UserRole("resourceflavor-viewer", crd.GROUP, "resourceflavors", tuple(_READ), False, False, ("admin",)),
    UserRole("resourceflavor-editor", crd.GROUP, "resourceflavors", tuple(_EDIT), False, False, ()),
    UserRole("topology-viewer", crd.GROUP, "topologies", tuple(_READ), False, False, ("admin",)),
    UserRole("topology-editor", crd.GROUP, "topologies", tuple(_EDIT), False, False, ()),
    # The other job kinds, as upstream ships them: a viewer and an editor each, like Jobs'.
    *(
        role
        for name, group, resource in (
            ("jaxjob", "kubeflow.org", "jaxjobs"),
            ("jobset", "jobset.x-k8s.io", "jobsets"),
            ("leaderworkerset", "leaderworkerset.x-k8s.io", "leaderworkersets"),
            ("mpijob", "kubeflow.org", "mpijobs"),
            ("paddlejob", "kubeflow.org", "paddlejobs"),
            ("pytorchjob", "kubeflow.org", "pytorchjobs"),
            ("raycluster", "ray.io", "rayclusters"),
            ("rayjob", "ray.io", "rayjobs"),
            ("rayservice", "ray.io", "rayservices"),
            ("sparkapplication", "sparkoperator.k8s.io", "sparkapplications"),
            ("tfjob", "kubeflow.org", "tfjobs"),
            ("trainjob", "trainer.kubeflow.org", "trainjobs"),
            ("xgboostjob", "kubeflow.org", "xgboostjobs"),
        )
        for role in (
            UserRole(f"{name}-viewer", group, resource, tuple(_READ), True, True, _NAMESPACE_FACING),
            UserRole(f"{name}-editor", group, resource, tuple(_EDIT), True, True, ()),
        )
    ),
)


def user_roles() -> list[Doc]:
    """Upstream's end-user ClusterRoles, and the two that aggregate them.

    ``kueue-batch-admin-role`` gathers every one; ``kueue-batch-user-role`` what a tenant
    needs (jobs, reading its LocalQueues, Workloads and pending positions). The viewers of
    namespaced things are also aggregated into the built-in ``view``, ``edit`` and
    ``admin`` roles, so a namespace editor lists its Workloads and LocalQueues.
    """
    docs: list[Doc] = []
    for role in USER_ROLES:
        labels = {"rbac.kueue.x-k8s.io/role": role.name, _BATCH_ADMIN: "true", **LABELS}
        if role.batch_user:
            labels[_BATCH_USER] = "true"
        labels.update({f"{_AGGREGATE}{name}": "true" for name in role.aggregate_to})
        rules = [_rule([role.group], [role.resource], list(role.verbs))]
        if role.status:
            rules.append(_rule([role.group], [f"{role.resource}/status"], ["get"]))
        docs.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": f"{ROLE_PREFIX}{role.name}-role", "labels": labels},
                "rules": rules,
            }
        )
    for name, label in (("batch-admin", _BATCH_ADMIN), ("batch-user", _BATCH_USER)):
        docs.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": f"{ROLE_PREFIX}{name}-role", "labels": dict(LABELS)},
                # No `rules`: the API server's aggregation controller fills them in and owns
                # them; naming them here (even empty) makes a server-side apply of the
                # manifests conflict with it once the role exists.
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
            }
        )
    return docs


# --- webhook configurations ------------------------------------------------------------------


def _webhook(name: str, client: crd.WebhookClientConfig, path: str, rules: list[Doc], namespace: str) -> Doc:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client.client_config(path),
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "rules": rules,
        # Never in the way of the control plane or of pykueue itself.
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": sorted({"kube-system", namespace}),
                }
            ]
        },
    }


def _kueue_rules(operations: list[str], extra: tuple[str, ...] = ()) -> list[Doc]:
    return [
        {
            "apiGroups": [crd.GROUP],
            "apiVersions": [crd.STORED_VERSION],
            "operations": operations,
            "resources": [*KUEUE_PLURALS, *extra],
            "scope": "*",
        }
    ]


def mutating_webhook_configuration(
    client: crd.WebhookClientConfig,
    namespace: str = "kueue-system",
    frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS,
) -> Doc:
    job_rules = [
        {
            "apiGroups": [integration.group],
            "apiVersions": [integration.version],
            # A kind that hands its queue to its pod template is defaulted on updates too.
            "operations": ["CREATE", "UPDATE"] if integration.mutate is not None else ["CREATE"],
            "resources": [integration.plural],
            "scope": "Namespaced",
        }
        for integration in enabled(frameworks)
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": _meta(MUTATING_WEBHOOK),
        "webhooks": [
            {
                **_webhook("mjob.pykueue.io", client, webhooks.JOBS_PATH, job_rules, namespace),
                "reinvocationPolicy": "Never",
            },
            _webhook(
                "mkueue.pykueue.io",
                client,
                webhooks.MUTATE_KUEUE_PATH,
                _kueue_rules(["CREATE", "UPDATE"]),
                namespace,
            ),
        ],
    }


def validating_webhook_configuration(
    client: crd.WebhookClientConfig,
    namespace: str = "kueue-system",
    frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS,
) -> Doc:
    rules = _kueue_rules(["CREATE", "UPDATE"], extra=("workloads/status",))
    # Every enabled kind with a Workload of its own, and the kinds queued through their pods
    # that have rules of their own (a LeaderWorkerSet's size).
    job_rules = [
        {
            "apiGroups": [integration.group],
            "apiVersions": [integration.version],
            "operations": ["CREATE", "UPDATE"],
            "resources": [integration.plural],
            "scope": "Namespaced",
        }
        for integration in enabled(frameworks)
        if integration.adapter is not None or integration.validate is not None
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": _meta(VALIDATING_WEBHOOK),
        "webhooks": [
            _webhook("vjob.pykueue.io", client, webhooks.VALIDATE_JOBS_PATH, job_rules, namespace),
            _webhook("vkueue.pykueue.io", client, webhooks.VALIDATE_KUEUE_PATH, rules, namespace),
        ],
    }


# --- the workload ----------------------------------------------------------------------------


def service(config: DeployConfig) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(SERVICE, config.namespace),
        "spec": {
            "selector": dict(LABELS),
            "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}],
        },
    }


def api_services(service_name: str, namespace: str, port: int = 443, ca_bundle: bytes = b"") -> list[Doc]:
    """The visibility API's APIServices, v1beta2 and v1beta1, served by ``service_name``.

    Upstream's skip TLS verification; ours carry the CA of the serving certificate
    (the controller publishes it, as into the webhook configurations).
    """
    docs = []
    for version in visibility.VERSIONS:
        spec: Doc = {
            "group": visibility.GROUP,
            "version": version,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "service": {"name": service_name, "namespace": namespace, "port": port},
        }
        if ca_bundle:
            spec["caBundle"] = base64.b64encode(ca_bundle).decode("ascii")
        docs.append(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": f"{version}.{visibility.GROUP}", "labels": dict(LABELS)},
                "spec": spec,
            }
        )
    return docs


def external_endpoint(service_name: str, namespace: str, address: str, port: int) -> list[Doc]:
    """A Service without selector and its EndpointSlice: ``address:port`` under a Service name.

    How an APIService reaches a server outside the cluster; the API server routes to the
    endpoint itself (``--enable-aggregator-routing``), and refuses loopback addresses in it.
    """
    family = "IPv6" if ":" in address else "IPv4"
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(service_name, namespace),
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                **_meta(service_name, namespace),
                "labels": {**LABELS, "kubernetes.io/service-name": service_name},
            },
            "addressType": family,
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        },
    ]


def secret(config: DeployConfig) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(SECRET, config.namespace),
        "type": "Opaque",
    }


def deployment(config: DeployConfig) -> Doc:
    probe = {"scheme": "HTTPS", "port": "webhook"}
    ports = [{"name": "webhook", "containerPort": config.webhook_port, "protocol": "TCP"}]
    if config.metrics_port:
        ports.append({"name": "metrics", "containerPort": config.metrics_port, "protocol": "TCP"})
    container: Doc = {
        "name": "manager",
        "image": config.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["pykueue"],
        "args": config.controller_args(),
        "env": [
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "PYKUEUE_WEBHOOK_SECRET", "value": SECRET},
            {"name": "PYKUEUE_WEBHOOK_SERVICE", "value": SERVICE},
        ],
        "ports": ports,
        "livenessProbe": {
            "httpGet": {**probe, "path": "/healthz"},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
        },
        "readinessProbe": {
            "httpGet": {**probe, "path": "/readyz"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    volumes: list[Doc] = [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    if config.configuration:
        container["volumeMounts"].append({"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True})
        volumes.append({"name": "config", "configMap": {"name": CONFIG_MAP}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta("pykueue-controller-manager", config.namespace),
        "spec": {
            "replicas": config.replica_count(),
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "terminationGracePeriodSeconds": 10,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


METRICS_SERVICE: Final = "pykueue-controller-manager-metrics-service"
# The metrics Service's own labels, so that the ServiceMonitor selects it and not the webhook
# Service (upstream's config/components/prometheus tells them apart the same way).
METRICS_LABELS: Final = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "metrics-service"}


def metrics_service(config: DeployConfig) -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": METRICS_SERVICE, "namespace": config.namespace, "labels": dict(METRICS_LABELS)},
        "spec": {
            "selector": dict(LABELS),
            "ports": [{"name": "metrics", "port": config.metrics_port, "targetPort": "metrics"}],
        },
    }


def service_monitor(config: DeployConfig) -> Doc:
    """The Prometheus Operator's scrape of the metrics Service (needs monitoring.coreos.com CRDs)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta("pykueue-controller-manager-metrics-monitor", config.namespace),
        "spec": {
            "selector": {"matchLabels": dict(METRICS_LABELS)},
            "namespaceSelector": {"matchNames": [config.namespace]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "30s"}],
        },
    }


def config_map(config: DeployConfig) -> Doc:
    """The controller's Configuration file."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(CONFIG_MAP, config.namespace),
        "data": {CONFIG_KEY: config.configuration},
    }


def namespace(config: DeployConfig) -> Doc:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(config.namespace)}


def render(config: DeployConfig | None = None) -> list[Doc]:
    """Every manifest, in the order they can be applied."""
    config = config or DeployConfig()
    client = config.webhook_client()
    return [
        namespace(config),
        *crd.crds(client),
        *rbac(config),
        *user_roles(),
        secret(config),
        *([config_map(config)] if config.configuration else []),
        mutating_webhook_configuration(client, config.namespace, config.frameworks),
        validating_webhook_configuration(client, config.namespace, config.frameworks),
        service(config),
        *api_services(SERVICE, config.namespace),
        deployment(config),
        *([metrics_service(config)] if config.metrics_port else []),
        *([service_monitor(config)] if config.metrics_port and config.service_monitor else []),
    ]
