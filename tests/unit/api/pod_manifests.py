"""A waiting pod's manifest, as the API server returns it, for the parse tests to change."""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]


def waiting_pod(**spec: Any) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "worker-0",
            "namespace": "team",
            "uid": "uid-1",
            "resourceVersion": "100",
            "creationTimestamp": "2026-12-05T03:00:00Z",
            "labels": {"kai.scheduler/queue": "research"},
            "annotations": {"pod-group-name": "pg-1", "gpu-fraction": "0.5"},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }
