"""Topology on the real control plane: the CRD's rules in kube-apiserver, and a Job whose
top owner asks for a rack bound inside one rack by `kai run`."""

from __future__ import annotations

import contextlib
from typing import Any

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    gpu_job,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

GROUP, VERSION, PLURAL = "kai.scheduler", "v1alpha1", "topologies"


def topology(name: str, *labels: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


async def _refused(create: Any) -> str:
    try:
        await create()
    except client.ApiException as error:
        assert error.status == 422, error.body
        return str(error.body)
    raise AssertionError("the API server accepted it")


async def test_the_crd_refuses_what_kais_cel_rules_refuse(api: client.ApiClient) -> None:
    objects = client.CustomObjectsApi(api)
    zone, rack, host = "topology.kubernetes.io/zone", "example.com/rack", "kubernetes.io/hostname"
    name = unique("topo")
    try:
        hostname_first = await _refused(
            lambda: objects.create_cluster_custom_object(
                GROUP, VERSION, PLURAL, topology(unique("bad"), host, zone)
            )
        )
        assert "lowest level" in hostname_first
        duplicate = await _refused(
            lambda: objects.create_cluster_custom_object(
                GROUP, VERSION, PLURAL, topology(unique("bad"), zone, zone)
            )
        )
        assert "nodeLabel must be unique" in duplicate
        await objects.create_cluster_custom_object(
            GROUP, VERSION, PLURAL, topology(name, zone, host)
        )
        relabelled = await _refused(
            lambda: objects.patch_cluster_custom_object(
                GROUP,
                VERSION,
                PLURAL,
                name,
                {"spec": {"levels": [{"nodeLabel": rack}, {"nodeLabel": host}]}},
                _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # not in the stubs
            )
        )
        assert "immutable" in relabelled
        await objects.patch_cluster_custom_object(  # an alias may change
            GROUP,
            VERSION,
            PLURAL,
            name,
            {"spec": {"levels": [{"nodeLabel": zone, "alias": "zone"}, {"nodeLabel": host}]}},
            _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # not in the stubs
        )
    finally:
        with contextlib.suppress(client.ApiException):
            await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


async def test_a_job_asking_for_a_rack_is_bound_inside_one_rack(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    # Rack r1: a (one of its 2 GPUs held by a pod bound there directly) and b; rack r2: c, d.
    # Bin-packing alone puts the 2-GPU pods on b and then r2; the required rack keeps both on r2.
    rack = f"example.com/{unique('rack')}"
    name = unique("topo")
    nodes = {node: unique(node) for node in "abcd"}
    for node, full_name in nodes.items():
        await gpu_nodes(
            GpuNode(name=full_name, gpus=2, topology={rack: "r1" if node in "ab" else "r2"})
        )
    objects = client.CustomObjectsApi(api)
    await objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, topology(name, rack))
    queue = unique("train")
    await create_queue(api, queue)
    core = client.CoreV1Api(api)
    busy = client.V1Pod(
        metadata=client.V1ObjectMeta(name="busy"),
        spec=client.V1PodSpec(
            node_name=nodes["a"],
            termination_grace_period_seconds=0,
            containers=[
                client.V1Container(
                    name="main",
                    image="example.invalid/none",
                    resources=client.V1ResourceRequirements(
                        requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}
                    ),
                )
            ],
        ),
    )
    await core.create_namespaced_pod(namespace, busy)
    try:
        config = operator_config(control_plane.kubeconfig, namespace)
        async with running_operator(config):
            job = gpu_job("train", queue, parallelism=2, gpus=2, min_member=2)
            job.metadata.annotations = {
                **(job.metadata.annotations or {}),
                "kai.scheduler/topology": name,
                "kai.scheduler/topology-required-placement": rack,
            }
            await client.BatchV1Api(api).create_namespaced_job(namespace, job)

            async def gang_bound() -> bool:
                bound = await bound_pods(api, namespace)
                return len([pod for pod in bound if pod != "busy"]) == 2

            await wait_for("the Job's two pods to be bound", gang_bound, timeout=120)
            bound = await bound_pods(api, namespace)
            assert {node for pod, node in bound.items() if pod != "busy"} == {
                nodes["c"],
                nodes["d"],
            }
    finally:
        await delete_queue(api, queue)
        await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
