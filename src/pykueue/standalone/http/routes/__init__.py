"""The standalone API's routes, one router per resource (`app.create_app` includes them in this order):

    health       GET /healthz (no identity needed)
    server       whoami, the node, the event feed
    usage        the usage ledger (`pykueue report`)
    objects      stored manifests: list, get, delete; apply
    workloads    describe, stop, resume
    logs         a job's logs
    identities   identities and their tokens (admins only)
    policy       policy history, one revision, rollback
    dashboard    the dashboard's document (the page's routes are `views.dashboard`'s)
    rows         the rows of `pykueue get`: last, as its path would shadow the fixed ones

Every route but ``/healthz`` and the dashboard's page takes the caller as the
`context.Caller` dependency and the server as `context.Ctx`.
"""
