"""Workload definitions (the `run.ai/v1alpha1` Karta / Workload Map format) and their uses.

A definition says how a workload type is built: components, pod templates,
replicas, status mapping and gang instructions. This package loads and validates
definitions (`loader`), evaluates their jq programs safely (`jqeval`, `jqsafe`),
applies them to objects (`structure`, `fragments`, `status`, `podresources`),
keeps the built-in catalog (`catalog`, `registry`) and emulates the
controllers that turn workloads into pods for the simulator (`expansion`).
"""
