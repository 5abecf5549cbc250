"""The `pykueue` command."""
