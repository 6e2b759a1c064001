"""The binder tells a pod's claims to provision its node before the Binding, and a claim
that cannot be told refuses the bind: the pod is not bound on a node its volume will not
be made for. A small in-process server stands in for the API server, so the order of
the writes can be seen and a claim's refusal made at will; the live path is tested
against the real control plane in tests/integration/test_operator_volumes.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from fractions import Fraction
from typing import Any

import pytest_asyncio
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kai.api.pods import parse_pod
from kai.api.volumes import SELECTED_NODE_ANNOTATION, VolumeObjects
from kai.engine.cycle import Binding
from kai.engine.model import PodGroup
from kai.kube.client import Kube
from kai.operator.backoff import BindBackoff
from kai.operator.binder import Binder, BindReport
from kai.operator.events import EventRecorder
from kai.operator.gpu_sharing import GpuSharing
from tests.unit.api.volume_manifests import claim, claim_volume, claimant, storage_class

NODE = "gpu-1"
GROUP = PodGroup("ml", "g", "queue", 1, 50, True)


class _Server:
    """Records each write, in order; a claim named `gone` answers 404."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any]] = []

    async def patch_claim(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name == "gone":
            status = {"kind": "Status", "reason": "NotFound", "message": "not found"}
            return web.json_response(status, status=404)
        self.writes.append((f"claim {name}", json.loads(await request.read())))
        return web.json_response({})

    async def binding(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.writes.append(("binding", body["target"]["name"]))
        return web.json_response(body, status=201)


@pytest_asyncio.fixture(loop_scope="function")
async def served() -> AsyncIterator[tuple[_Server, Binder]]:
    server = _Server()
    app = web.Application()
    app.router.add_patch("/api/v1/namespaces/ml/persistentvolumeclaims/{name}", server.patch_claim)
    app.router.add_post("/api/v1/namespaces/ml/pods/p/binding", server.binding)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with ApiClient(Configuration(host=f"http://127.0.0.1:{port}")) as client:
            kube = Kube(client)
            sharing = GpuSharing(kube, "kai-resource-reservation", "none", None, 4)
            binder = Binder(kube, sharing, BindBackoff(), EventRecorder(kube, "t"), 4, lambda: True)
            yield server, binder
    finally:
        await runner.cleanup()


async def _no_grouping(_: str) -> dict[str, str]:
    return {}


async def _bind(binder: Binder, *claims: str) -> BindReport:
    manifest = claimant(*(claim_volume(name) for name in claims))
    pod = parse_pod(manifest, GROUP.key)
    late = storage_class("late", "WaitForFirstConsumer")
    objects = {f"ml/{name}": claim(name, storageClassName="late") for name in claims}
    volumes = VolumeObjects(objects, {}, {"late": late})
    return await binder.bind(
        [Binding(pod.key, NODE, Fraction(0), ())],
        {pod.key: pod},
        {GROUP.key: GROUP},
        {pod.key: manifest},
        {},
        _no_grouping,
        volumes=volumes,
    )


async def test_each_claim_is_told_the_node_before_the_binding(
    served: tuple[_Server, Binder],
) -> None:
    server, binder = served
    report = await _bind(binder, "data", "scratch")
    told = {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: NODE}}}
    assert server.writes == [("claim data", told), ("claim scratch", told), ("binding", NODE)]
    assert "ml/p" in report.bound


async def test_a_claim_that_cannot_be_told_refuses_the_bind(
    served: tuple[_Server, Binder],
) -> None:
    server, binder = served
    report = await _bind(binder, "gone")
    assert server.writes == []
    assert "ml/p" not in report.bound
    assert report.failed == {"ml/p": "404 NotFound"}
