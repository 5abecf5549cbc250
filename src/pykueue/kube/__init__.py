"""The Kubernetes home: what runs only against an API server.

manager           the shared manager, with MultiKueue's check answered over kubeconfigs
leader            leader election over a Lease, and a store only the leader writes
webhooks, certs, conversion_webhook    the HTTPS webhooks and their certificates
deploy            the manifests `pykueue manifests` prints (CRDs, RBAC, Deployment)
visibility_api, front_proxy            the aggregated visibility API
local_registration                     webhooks of controllers run outside the cluster
health            the plain-HTTP side door: probes, metrics, dashboard
estimate_annotations, cluster_view     estimates on Workloads; `pykueue dashboard`'s view
"""
