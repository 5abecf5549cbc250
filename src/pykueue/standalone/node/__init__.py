"""This machine as a node: the `executor` runs unsuspended Jobs' pods as process groups, as the
job's owner (`accounts`), fenced in by `isolation` and `cgroups`, started by the `launcher`."""
