"""Kubernetes-facing types: the wire format (CRD models, quantities) and its parsing into engine objects."""
