"""Job adapters for the Kubernetes controller, one module per job kind (upstream's "integrations").

See `pykueue.controllers.jobframework` for the protocol and the registry.
"""
