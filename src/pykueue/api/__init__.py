"""Typed models of the Kueue API and of the core Kubernetes kinds pykueue reads."""
