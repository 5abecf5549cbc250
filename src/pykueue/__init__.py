"""pykueue: Kueue's job-queueing semantics in Python.

Layers, lowest first (enforced by import-linter, see pyproject.toml):

    api         typed models of the Kueue and core Kubernetes kinds, validation, conversion
    engine      the pure admission engine: quota, cohorts, queues, flavors, preemption
    store, controllers   object stores and reconcilers over them
    cli, server, sim, scenario   entry points
"""

__version__ = "0.1.0"
