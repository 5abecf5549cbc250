"""MultiKueue: a manager's jobs run on worker clusters, for both homes.

controller          the admission check ``kueue.x-k8s.io/multikueue``: copies and follows
clusters            a connection to each worker and its ``Active`` condition
standalone_workers  workers that are standalone servers
managed_by          which new jobs are handed to MultiKueue (managedBy defaulting)
messages            the words of its conditions
"""
