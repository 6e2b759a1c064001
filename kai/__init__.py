"""kai: a KAI-compatible Kubernetes scheduler for AI workloads whose cycles are solved with CP-SAT."""

__version__ = "0.1.0"
