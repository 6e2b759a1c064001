"""The binder tells a pod's claims to provision its node before the Binding, and gives a
claim of a class without a provisioner one of the node's free volumes (its `claimRef`
written first); a claim that cannot be told, or a volume taken meanwhile, refuses the
bind: the pod is not bound on a node its volume will not be made for, or is not there.
A small in-process server stands in for the API server, so the order of the writes can
be seen and a refusal made at will; the live path is tested against the real control
plane in tests/integration/test_operator_volumes.py."""

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
from kai.operator.binder import BOUND_BY_CONTROLLER_ANNOTATION, Binder, BindReport
from kai.operator.events import EventRecorder
from kai.operator.gpu_sharing import GpuSharing
from tests.unit.api.volume_manifests import claim, claim_volume, claimant, storage_class
from tests.unit.engine.builders import node

NODE = "gpu-1"
HOSTNAME = "kubernetes.io/hostname"
GROUP = PodGroup("ml", "g", "queue", 1, 50, True)


class _Server:
    """Records each write, in order; a claim named `gone` answers 404, a volume named
    `stale` 409 (its resourceVersion is not the one sent)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any]] = []

    async def patch_claim(self, request: web.Request) -> web.StreamResponse:
        return await self._patch(request, "claim", "gone", 404, "NotFound")

    async def patch_volume(self, request: web.Request) -> web.StreamResponse:
        return await self._patch(request, "volume", "stale", 409, "Conflict")

    async def _patch(
        self, request: web.Request, kind: str, refused: str, code: int, reason: str
    ) -> web.StreamResponse:
        """Record the patch, or answer `code` for the object named `refused`."""
        name = request.match_info["name"]
        if name == refused:
            status = {"kind": "Status", "reason": reason, "message": reason}
            return web.json_response(status, status=code)
        self.writes.append((f"{kind} {name}", json.loads(await request.read())))
        return web.json_response({})

    async def binding(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.writes.append((f"binding {request.match_info['pod']}", body["target"]["name"]))
        return web.json_response(body, status=201)


@pytest_asyncio.fixture(loop_scope="function")
async def served() -> AsyncIterator[tuple[_Server, Binder]]:
    server = _Server()
    app = web.Application()
    app.router.add_patch("/api/v1/namespaces/ml/persistentvolumeclaims/{name}", server.patch_claim)
    app.router.add_patch("/api/v1/persistentvolumes/{name}", server.patch_volume)
    app.router.add_post("/api/v1/namespaces/ml/pods/{pod}/binding", server.binding)
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
    assert server.writes == [("claim data", told), ("claim scratch", told), ("binding p", NODE)]
    assert "ml/p" in report.bound


async def test_a_claim_that_cannot_be_told_refuses_the_bind(
    served: tuple[_Server, Binder],
) -> None:
    server, binder = served
    report = await _bind(binder, "gone")
    assert server.writes == []
    assert "ml/p" not in report.bound
    assert report.failed == {"ml/p": "404 NotFound"}


def _disk(name: str, size: str) -> dict[str, Any]:
    at_node = [{"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [NODE]}]}]
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": f"rv-{name}"},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": size},
            "nodeAffinity": {"required": {"nodeSelectorTerms": at_node}},
        },
    }


async def _bind_static(
    binder: Binder, claims: dict[str, str], disks: dict[str, str], gang: int = 1
) -> BindReport:
    """Pods p0, p1, ... of one gang of `gang` pods, pod i with claim `c<i>` of the size
    `claims` gives it, onto NODE, whose free volumes are `disks` (name -> size)."""
    group = PodGroup("ml", "g", "queue", gang, 50, True)
    manifests, pods = {}, {}
    for index, name in enumerate(claims):
        manifest = claimant(claim_volume(name))
        manifest["metadata"] |= {"name": f"p{index}", "uid": f"u{index}"}
        pod = parse_pod(manifest, group.key)
        manifests[pod.key], pods[pod.key] = manifest, pod
    local = storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
    objects = {
        f"ml/{name}": claim(
            name, storageClassName="local", resources={"requests": {"storage": size}}
        )
        for name, size in claims.items()
    }
    volumes = VolumeObjects(
        objects, {name: _disk(name, size) for name, size in disks.items()}, {"local": local}
    )
    return await binder.bind(
        [Binding(key, NODE, Fraction(0), ()) for key in pods],
        pods,
        {group.key: group},
        manifests,
        {},
        _no_grouping,
        volumes=volumes,
        nodes=[node(NODE, labels={HOSTNAME: NODE})],
    )


def _claim_ref(claim_name: str, volume: str) -> dict[str, Any]:
    return {
        "metadata": {
            "annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"},
            "resourceVersion": f"rv-{volume}",
        },
        "spec": {
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": "ml",
                "name": claim_name,
            }
        },
    }


async def test_each_claim_gets_its_own_volume_smallest_first_before_its_binding(
    served: tuple[_Server, Binder],
) -> None:
    server, binder = served
    report = await _bind_static(
        binder, {"big": "500Gi", "small": "10Gi"}, {"huge": "2Ti", "tiny": "20Gi", "mid": "1Ti"}
    )
    assert set(report.bound) == {"ml/p0", "ml/p1"}
    given = {name: body for name, body in server.writes if name.startswith("volume")}
    assert given == {
        "volume mid": _claim_ref("big", "mid"),
        "volume tiny": _claim_ref("small", "tiny"),
    }
    for pod, volume in (("p0", "volume mid"), ("p1", "volume tiny")):
        order = [name for name, _ in server.writes]
        assert order.index(volume) < order.index(f"binding {pod}")


async def test_a_volume_taken_meanwhile_refuses_the_bind(served: tuple[_Server, Binder]) -> None:
    server, binder = served
    report = await _bind_static(binder, {"data": "10Gi"}, {"stale": "20Gi"})
    assert server.writes == []
    assert report.failed == {"ml/p0": "409 Conflict"}


async def test_a_gang_short_of_volumes_is_not_bound_at_all(served: tuple[_Server, Binder]) -> None:
    server, binder = served
    report = await _bind_static(binder, {"a": "10Gi", "b": "10Gi"}, {"only": "20Gi"}, gang=2)
    assert server.writes == []
    assert report.bound == {}
    assert report.held_back == {"ml/g": ["ml/p0", "ml/p1"]}
    assert "no free volume made beforehand on gpu-1" in report.failed["ml/p1"]


async def test_a_volume_given_in_an_earlier_cycle_is_not_given_again_while_the_cache_lags(
    served: tuple[_Server, Binder],
) -> None:
    """The next cycle's view may still show the volume free, at the version it was given
    at; the binder gives the next claim another one instead of a write sure to conflict."""
    server, binder = served
    disks = {"d1": "10Gi", "d2": "10Gi"}
    await _bind_static(binder, {"a": "10Gi"}, disks)
    await _bind_static(binder, {"b": "10Gi"}, disks)
    written = [
        (name, body["spec"]["claimRef"]["name"])
        for name, body in server.writes
        if name.startswith("volume")
    ]
    assert written == [("volume d1", "a"), ("volume d2", "b")]
