"""Pods with volume claims, through the real API server and `kai run`.

Two nodes of the test's pool, zone a and zone b; a first pod is held to zone a, so
bin-packing would put every later pod there. Then:
- a pod whose claim is bound to a local volume of the zone-b node goes there;
- a pod whose claim is of a `WaitForFirstConsumer` class that makes volumes in zone b only
  goes there, and its claim is told the node before the pod is bound (what makes the
  provisioner create the volume);
- a pod whose claim binds at once and is not bound yet waits, told why; once the test
  binds the claim to a volume of the zone-a node (as a user pre-binding it would), the
  pod is bound there.
A second test gives claims of a class without a provisioner the local volumes made
beforehand: kai writes the chosen volume's `claimRef`, and the control plane's volume
controller (kube-controller-manager's `persistentvolume-binder-controller`) binds the
claim to it, as it does for kube-scheduler.

Cluster-wide objects (volumes, classes) carry the test's unique names and are deleted.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kai_operator_support import (
    a_queue,
    bound_pods,
    gpu_pod,
    operator_config,
    running_operator,
    told_unschedulable,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.api.volumes import BIND_COMPLETED_ANNOTATION, NO_PROVISIONER, SELECTED_NODE_ANNOTATION
from kai.kube.client import ApiError, Kube
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def _volume(name: str, node: str) -> dict[str, Any]:
    at_node = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": at_node}},
        },
    }


def _class(name: str, mode: str, zones: list[str] | None = None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "csi.example.invalid",
        "volumeBindingMode": mode,
    }
    if zones:
        manifest["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": ZONE, "values": zones}]}
        ]
    return manifest


def _claim(
    name: str, storage_class: str, annotations: dict[str, str] | None = None, volume: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": storage_class,
    }
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }


def _pod(name: str, queue: str, pool: dict[str, str], claim: str | None = None) -> client.V1Pod:
    pod = gpu_pod(name, queue, gpus=1)
    pod.spec.node_selector = pool
    if claim is not None:
        source = client.V1PersistentVolumeClaimVolumeSource(claim_name=claim)
        pod.spec.volumes = [client.V1Volume(name="data", persistent_volume_claim=source)]
    return pod


@contextlib.asynccontextmanager
async def _cluster_wide(kube: Kube) -> AsyncIterator[list[str]]:
    """Paths of cluster-wide objects the test creates, deleted at its end."""
    created: list[str] = []
    try:
        yield created
    finally:
        for path in created:
            with contextlib.suppress(ApiError):
                await kube.delete(path)


async def test_claims_decide_the_node_are_told_it_and_hold_the_pod_until_bound(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    kube = Kube(api)
    pool = {"kai-test/volumes": unique("pool")}
    node_a, node_b = unique("gpu"), unique("gpu")
    await gpu_nodes(
        GpuNode(name=node_a, gpus=4, gpu_memory_mib=40960, topology={**pool, ZONE: "a"})
    )
    await gpu_nodes(
        GpuNode(name=node_b, gpus=4, gpu_memory_mib=40960, topology={**pool, ZONE: "b"})
    )
    disk_a, disk_b = unique("disk"), unique("disk")
    zonal, at_once = unique("zonal"), unique("now")
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    config = operator_config(control_plane.kubeconfig, namespace)
    async with (
        a_queue(api, "volumes") as queue,
        _cluster_wide(kube) as created,
        running_operator(config),
    ):
        for path, manifest in (
            (VOLUMES, _volume(disk_a, node_a)),
            (VOLUMES, _volume(disk_b, node_b)),
            (CLASSES, _class(zonal, "WaitForFirstConsumer", ["b"])),
            (CLASSES, _class(at_once, "Immediate")),
        ):
            await kube.create(path, manifest)
            created.append(f"{path}/{manifest['metadata']['name']}")
        bound_there = {BIND_COMPLETED_ANNOTATION: "yes"}
        await kube.create(claims, _claim("local", "", bound_there, volume=disk_b))
        await kube.create(claims, _claim("scratch", zonal))
        await kube.create(claims, _claim("later", at_once))

        first = _pod("first", queue, pool)
        first.spec.node_selector = {**pool, ZONE: "a"}
        await core.create_namespaced_pod(namespace, first)

        async def first_bound() -> bool:
            return (await bound_pods(api, namespace)).get("first") == node_a

        await wait_for("the first pod on the zone-a node", first_bound)
        for name, claim in (("reader", "local"), ("writer", "scratch"), ("waiter", "later")):
            await core.create_namespaced_pod(namespace, _pod(name, queue, pool, claim))

        async def placed_by_their_claims() -> bool:
            placed = await bound_pods(api, namespace)
            return (
                placed.get("reader") == node_b
                and placed.get("writer") == node_b
                and "waiter" not in placed
                and await told_unschedulable(
                    api,
                    namespace,
                    "waiter",
                    f"claim {namespace}/later is not bound",
                    "Immediate",
                )
            )

        await wait_for("reader and writer on zone b, waiter told why", placed_by_their_claims)
        scratch = await kube.get(f"{claims}/scratch")
        assert scratch["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == node_b

        await kube.merge_patch(
            f"{claims}/later",
            {"metadata": {"annotations": bound_there}, "spec": {"volumeName": disk_a}},
        )

        async def waiter_bound() -> bool:
            return (await bound_pods(api, namespace)).get("waiter") == node_a

        await wait_for("the waiter bound where its claim's volume is", waiter_bound)


def _local_volume(name: str, node: str, storage_class: str, size: str) -> dict[str, Any]:
    at_host = [{"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "local": {"path": "/mnt/disks/nvme0"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": at_host}},
        },
    }


async def test_claims_take_local_volumes_made_beforehand_and_the_controller_binds_them(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    """node-a has a 10Gi disk, node-b a 100Gi one. A pod whose claim asks 50Gi goes to
    node-b, the disk's claimRef names the claim and the volume controller binds them; a
    second such pod waits, told no node has a volume left for it, until a 60Gi disk is
    made on node-a, and goes there (not to node-a's 10Gi disk)."""
    core = client.CoreV1Api(api)
    kube = Kube(api)
    pool = {"kai-test/volumes": unique("pool")}
    node_a, node_b = unique("gpu"), unique("gpu")
    await gpu_nodes(GpuNode(name=node_a, gpus=4, gpu_memory_mib=40960, topology=pool))
    await gpu_nodes(GpuNode(name=node_b, gpus=4, gpu_memory_mib=40960, topology=pool))
    local = unique("local")
    disk_a, disk_b, disk_later = unique("disk"), unique("disk"), unique("disk")
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    config = operator_config(control_plane.kubeconfig, namespace)
    async with (
        a_queue(api, "static") as queue,
        _cluster_wide(kube) as created,
        running_operator(config),
    ):
        made_beforehand: dict[str, Any] = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": local},
            "provisioner": NO_PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
        }
        for path, manifest in (
            (CLASSES, made_beforehand),
            (VOLUMES, _local_volume(disk_a, node_a, local, "10Gi")),
            (VOLUMES, _local_volume(disk_b, node_b, local, "100Gi")),
        ):
            await kube.create(path, manifest)
            created.append(f"{path}/{manifest['metadata']['name']}")
        for name in ("first", "second"):
            request = {**_claim(name, local)}
            request["spec"]["resources"] = {"requests": {"storage": "50Gi"}}
            await kube.create(claims, request)
        await core.create_namespaced_pod(namespace, _pod("first", queue, pool, "first"))

        async def first_bound_with_its_disk() -> bool:
            if (await bound_pods(api, namespace)).get("first") != node_b:
                return False
            claim = await kube.get(f"{claims}/first")
            bound = (claim.get("status") or {}).get("phase") == "Bound"
            return bound and bool(claim["spec"].get("volumeName") == disk_b)

        await wait_for(
            "first on node-b, its claim bound to node-b's disk", first_bound_with_its_disk
        )
        volume = await kube.get(f"{VOLUMES}/{disk_b}")
        assert volume["spec"]["claimRef"]["name"] == "first"
        assert (await kube.get(f"{VOLUMES}/{disk_a}"))["spec"].get("claimRef") is None

        await core.create_namespaced_pod(namespace, _pod("second", queue, pool, "second"))

        async def second_told_why() -> bool:
            # Once the cache shows node-b's disk taken, its size leaves the pool; until then
            # first holds it on node-b.
            if "second" in await bound_pods(api, namespace):
                return False
            taken = f"insufficient volume/{local}/Filesystem/100Gi+"
            gone = f"asks for 50Gi of StorageClass {local} (Filesystem), and no free volume"
            return await told_unschedulable(
                api, namespace, "second", taken
            ) or await told_unschedulable(api, namespace, "second", gone, "the largest is 10Gi")

        await wait_for("second waiting for a volume", second_told_why)
        later = _local_volume(disk_later, node_a, local, "60Gi")
        await kube.create(VOLUMES, later)
        created.append(f"{VOLUMES}/{disk_later}")

        async def second_bound_with_the_new_disk() -> bool:
            if (await bound_pods(api, namespace)).get("second") != node_a:
                return False
            claim = await kube.get(f"{claims}/second")
            return bool(claim["spec"].get("volumeName") == disk_later)

        await wait_for("second on node-a with the new disk", second_bound_with_the_new_disk)
