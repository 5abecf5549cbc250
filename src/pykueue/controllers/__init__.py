"""Reconcilers over a `pykueue.store.base.Store`: the engine's link to the world.

admission   keeps an engine State in step with the stored objects, runs the
            scheduler, and writes its decisions into Workload status
(job adapters and the local executor build on the Workload status it writes)
"""
