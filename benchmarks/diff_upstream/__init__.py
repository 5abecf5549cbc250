"""Differential testing against upstream Kueue's own scheduler (issue 39; docs/differential.md).

generator  seeded random cases in the scenario format (no `expect`)
upstream   plays a case on a real kube-apiserver with the oracle (hack/diff-upstream/oracle)
compare    what users see, from pykueue's scenario runner and from the API server, side by side
shrink     the smallest case that still diverges
__main__   `python -m benchmarks.diff_upstream --cases N --seed S` (make diff-upstream)
"""
