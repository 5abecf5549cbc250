"""The standalone home: pykueue on one machine, with no cluster.

    runtime     `pykueue up`: store, manager, executor and HTTP API in one process
    manager     the shared manager over the SQLite store, with `admission.StandaloneAdmission`
    http/       the HTTP API (FastAPI), access control, ``apply`` and its limits
    node/       the local node: the executor and how a pod is fenced in (users, cgroups)

`python -m pykueue.standalone` is the program `pykueue up` becomes (the CLI only launches it
and talks to it over HTTP).
"""
