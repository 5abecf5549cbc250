"""The admission engine: pure, deterministic, no I/O and no wall clock.

The engine holds the queueing state (flavors, queues, cohorts, workloads) as
plain Python values, and `scheduler.run_cycle` performs one pass of Kueue's
scheduler over it: take the head of every ClusterQueue, assign flavors
against the current usage, order the entries, then admit or preempt in order
without over-admitting any cohort. Callers (the scenario runner, the
simulator, the controllers) feed it objects and read back its decisions;
they never compute quota themselves.
"""
