"""Object stores: one interface (`base.Store`), several backends.

    memory       in-process, for tests and the simulator's controllers
    sqlite       one durable file, for standalone mode
    kubernetes   the cluster's API server, for the controller

Every backend speaks Kubernetes manifests as plain dicts, keeps a
resourceVersion per object, refuses stale writes with `errors.Conflict`, and
streams changes to watchers, so the controllers above run unchanged on any of
them.
"""
