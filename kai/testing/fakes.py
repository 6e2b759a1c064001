"""Fake GPU nodes and pod phases for a control plane that runs no kubelet.

A scheduler only reads Node objects and writes bindings, so a Node with the
right labels, allocatable resources and a Ready condition is all it can tell
of a GPU machine. Pods bound to it stay Pending (nothing runs them); tests move
them on with :func:`set_pod_phase`, as a kubelet would report.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from kubernetes_asyncio import client

from kai.kube.client import ApiError, Kube

GPU_RESOURCE = "nvidia.com/gpu"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
HOSTNAME_LABEL = "kubernetes.io/hostname"

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed"]


@dataclass(frozen=True)
class GpuNode:
    """What a fake GPU node offers. Quantities use Kubernetes notation."""

    name: str
    gpus: int = 8
    gpu_memory_mib: int = 81920
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110
    topology: Mapping[str, str] = field(default_factory=dict)
    """Topology labels, e.g. {"topology.kubernetes.io/zone": "zone-a"}."""
    extended: Mapping[str, str] = field(default_factory=dict)
    """Other allocatable resources, e.g. {"rdma/hca": "1"} for an RDMA device."""

    def labels(self) -> dict[str, str]:
        return {
            HOSTNAME_LABEL: self.name,
            GPU_COUNT_LABEL: str(self.gpus),
            GPU_MEMORY_LABEL: str(self.gpu_memory_mib),
            **self.topology,
        }

    def resources(self) -> dict[str, str]:
        return {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            GPU_RESOURCE: str(self.gpus),
            **self.extended,
        }


NodeFactory = Callable[[GpuNode], Awaitable[client.V1Node]]
"""Creates a fake GPU node (see the gpu_nodes fixture of the integration tests)."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


async def create_gpu_node(api: client.ApiClient, node: GpuNode) -> client.V1Node:
    """Create the Node and report it Ready with its capacity, as a kubelet would."""
    core = client.CoreV1Api(api)
    await core.create_node(
        client.V1Node(metadata=client.V1ObjectMeta(name=node.name, labels=node.labels()))
    )
    now = _now()
    status = {
        "status": {
            "capacity": node.resources(),
            "allocatable": node.resources(),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "fake node: no kubelet runs",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
    }
    updated: client.V1Node = await core.patch_node_status(node.name, status)
    return updated


async def set_pod_phase(
    api: client.ApiClient, namespace: str, name: str, phase: PodPhase
) -> client.V1Pod:
    """Write a pod's status.phase through the status subresource.

    Moving to Running also stamps status.startTime, which run-time rules read.
    """
    status: dict[str, object] = {"phase": phase}
    if phase == "Running":
        status["startTime"] = _now()
    updated: client.V1Pod = await client.CoreV1Api(api).patch_namespaced_pod_status(
        name, namespace, {"status": status}
    )
    return updated


async def wait_for_default_service_account(kube: Kube, namespace: str) -> None:
    """Return once the namespace's default ServiceAccount exists: until then the API server
    refuses every pod created in it."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
    while True:
        try:
            await kube.get(path)
            return
        except ApiError:
            await asyncio.sleep(0.1)
