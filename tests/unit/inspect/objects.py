"""Cluster objects as the API server returns them, for the summarisers' tests."""

from __future__ import annotations

from typing import Any


def queue(
    name: str,
    parent: str | None = None,
    gpu: tuple[object, object] = (0, -1),
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Queue with this GPU (quota, limit), 1000m/-1 CPU and 100/-1 MB memory."""
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": gpu[0], "limit": gpu[1]},
            "cpu": {"quota": 1000, "limit": -1},
            "memory": {"quota": 100, "limit": -1},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    found: dict[str, Any] = {"metadata": {"name": name}, "spec": spec}
    if status is not None:
        found["status"] = status
    return found


def resource_list(gpu: str, cpu: str = "0m", memory: str = "0M") -> dict[str, str]:
    return {"nvidia.com/gpu": gpu, "cpu": cpu, "memory": memory}


def pod_group(
    name: str, queue_name: str, reason: str | None = None, message: str = ""
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"queue": queue_name, "minMember": 2},
    }
    if reason:
        found["status"] = {
            "schedulingConditions": [
                {
                    "type": "UnschedulableOnNodePool",
                    "nodePool": "default",
                    "status": "True",
                    "reasons": [{"reason": reason, "message": message}],
                    "transitionID": "1",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    return found


def pod(
    name: str,
    group: str | None,
    node: str | None = None,
    gpus: int = 0,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "ml",
    cpu: str = "100m",
    **spec: Any,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    notes = dict(annotations or {})
    if group:
        notes["pod-group-name"] = group
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": notes,
            "labels": labels or {},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "resources": {"requests": requests, "limits": limits}}],
            **({"nodeName": node} if node else {}),
            **spec,
        },
        "status": {"phase": "Running" if node else "Pending"},
    }


def node(name: str, gpus: int, memory_mib: object = 40000) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.memory": str(memory_mib)}},
        "status": {
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
