"""The reconcilers both homes run, over any `pykueue.store.base.Store`.

    manager          one loop: a watch per kind, then per batch of events one pass
                     of the reconcilers below (`manager.Manager`)
    admission        the engine fed from the store; its decisions written to Workloads
    queue_status     ClusterQueue / LocalQueue / Cohort status from the engine
    jobframework     the job protocol and registry; `integrations/` has one module per kind
    job_reconciler   one Workload per queued job; jobs started and stopped as Workloads say
    pod_groups, topology_ungater, node_failures, provisioning, retention, events, ...

Nothing here knows which home it runs in: the Kubernetes home (`pykueue.kube`) and the
standalone home (`pykueue.standalone`) choose the store and which reconcilers run.
"""
