"""What the live commands read, and the only module of `kai.inspect` that talks to an API server.

Each command reads once, through kai's own JSON client (`kai.kube.client`, its retry
policy and credentials) and paged listings (`kai.kube.listing`), only what it shows:
pods are filtered by the server where a field selector can say what is wanted, and
`kai why` reads one group's pods and events rather than the cluster's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kai.kube.client import ApiError, Kube, connect
from kai.kube.listing import list_all

QUEUES = "/apis/scheduling.run.ai/v2/queues"
_POD_GROUPS = "/apis/scheduling.run.ai/v2alpha2"
_NOT_FOUND = 404

WAITING_PODS = "spec.nodeName=,status.phase=Pending"
"""Pods on no node yet: all that `kai queues` counts as pending."""
PODS_ON_NODES = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""Pods holding node capacity: what `kai nodes` subtracts (the scheduler's rule, as in kubectl describe node)."""


class ClusterReader:
    """Reads for one command, over one API client."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    async def queues(self) -> list[dict[str, Any]]:
        return (await list_all(self._kube, QUEUES))[0]

    async def pod_groups(self, namespace: str | None) -> list[dict[str, Any]]:
        return (await list_all(self._kube, _collection(_POD_GROUPS, "podgroups", namespace)))[0]

    async def pods(self, namespace: str | None, selector: str = "") -> list[dict[str, Any]]:
        query = [("fieldSelector", selector)] if selector else []
        return (await list_all(self._kube, _collection("/api/v1", "pods", namespace), query))[0]

    async def nodes(self) -> list[dict[str, Any]]:
        return (await list_all(self._kube, "/api/v1/nodes"))[0]

    async def events(self, namespace: str, about: str) -> list[dict[str, Any]]:
        """Events of the namespace whose involved object is named `about`."""
        query = [("fieldSelector", f"involvedObject.name={about}")]
        path = _collection("/api/v1", "events", namespace)
        return (await list_all(self._kube, path, query))[0]

    async def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    async def pod_group(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get(f"{_POD_GROUPS}/namespaces/{namespace}/podgroups/{name}")

    async def queue(self, name: str) -> dict[str, Any] | None:
        return await self._get(f"{QUEUES}/{name}")

    async def _get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when the server has none at `path`."""
        try:
            return await self._kube.get(path)
        except ApiError as error:
            if error.status == _NOT_FOUND:
                return None
            raise


@contextlib.asynccontextmanager
async def reading(kubeconfig: Path | None) -> AsyncIterator[ClusterReader]:
    """A reader on the cluster the kubeconfig (or the pod's ServiceAccount) names."""
    client = await connect(kubeconfig, connections=8)
    async with client:
        yield ClusterReader(Kube(client))


def _collection(prefix: str, plural: str, namespace: str | None) -> str:
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
