"""Proof that the integration control plane is a real Kubernetes API.

Each test exercises behaviour a mock would not have: schema validation of
kai's CRDs, the Job controller, the binding subresource and RBAC.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import (
    GPU_MEMORY_LABEL,
    GPU_RESOURCE,
    GpuNode,
    NodeFactory,
    set_pod_phase,
)
from kai.testing.kubeconfig import service_account_kubeconfig

QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL = "scheduling.run.ai", "v2", "queues"


def _queue(name: str, gpu_quota: object) -> dict[str, Any]:
    return {
        "apiVersion": f"{QUEUE_GROUP}/{QUEUE_VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": {"gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1}}},
    }


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            scheduler_name="kai-scheduler",
            containers=[client.V1Container(name="main", image="example.invalid/none")],
        ),
    )


async def test_queue_schema_rejects_string_quota(api: client.ApiClient) -> None:
    objects = client.CustomObjectsApi(api)
    good = _unique("queue")
    await objects.create_cluster_custom_object(
        QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL, _queue(good, 2.5)
    )
    try:
        stored = await objects.get_cluster_custom_object(
            QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL, good
        )
        assert stored["spec"]["resources"]["gpu"]["quota"] == 2.5

        with pytest.raises(ApiException) as rejected:
            await objects.create_cluster_custom_object(
                QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL, _queue(_unique("queue"), "abc")
            )
        assert rejected.value.status == 422
        assert "spec.resources.gpu.quota" in str(rejected.value.body)
    finally:
        await objects.delete_cluster_custom_object(QUEUE_GROUP, QUEUE_VERSION, QUEUE_PLURAL, good)


async def test_job_controller_creates_the_pods(api: client.ApiClient, namespace: str) -> None:
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="train"),
        spec=client.V1JobSpec(
            parallelism=3,
            completions=3,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    scheduler_name="kai-scheduler",
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="example.invalid/none")],
                )
            ),
        ),
    )
    await client.BatchV1Api(api).create_namespaced_job(namespace, job)
    core = client.CoreV1Api(api)
    async with asyncio.timeout(60):
        while len(pods := (await core.list_namespaced_pod(namespace)).items) < 3:
            await asyncio.sleep(0.1)
    assert len(pods) == 3
    for pod in pods:
        assert pod.metadata.labels["job-name"] == "train"
        assert pod.spec.scheduler_name == "kai-scheduler"
        assert pod.spec.node_name is None  # nothing scheduled it


async def test_binding_sets_node_once(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory
) -> None:
    node = await gpu_nodes(GpuNode(name=_unique("gpu-node"), gpus=4, gpu_memory_mib=40960))
    assert node.status.allocatable[GPU_RESOURCE] == "4"
    assert node.metadata.labels[GPU_MEMORY_LABEL] == "40960"
    assert not node.spec.taints  # a Ready node a scheduler may use

    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, _pod("worker"))
    first = await _bind(core, namespace, "worker", node.metadata.name)
    assert first["code"] == 201, first
    bound = await core.read_namespaced_pod("worker", namespace)
    assert bound.spec.node_name == node.metadata.name
    assert bound.status.phase == "Pending"  # no kubelet runs it

    again = await _bind(core, namespace, "worker", node.metadata.name)
    assert again["code"] == 409, again
    assert again["reason"] == "Conflict"

    running = await set_pod_phase(api, namespace, "worker", "Running")
    assert running.status.phase == "Running"
    assert running.status.start_time is not None


async def _bind(core: client.CoreV1Api, namespace: str, pod: str, node: str) -> dict[str, Any]:
    """POST pods/binding and return the Status the server answers with.

    The generated client would parse that Status as a V1Binding and fail (it
    has no target), so the raw response is read instead.
    """
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
    response = cast(
        aiohttp.ClientResponse,
        await core.create_namespaced_pod_binding(pod, namespace, binding, _preload_content=False),
    )
    status: dict[str, Any] = await response.json()
    return status


async def test_service_account_needs_rbac(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="reader"))
    )
    kubeconfig = await service_account_kubeconfig(
        api,
        namespace=namespace,
        service_account="reader",
        server=control_plane.server,
        ca_cert=control_plane.ca_cert,
        path=tmp_path / "reader.kubeconfig",
    )
    async with await config.new_client_from_config(config_file=str(kubeconfig)) as reader:
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(reader).list_namespaced_pod(namespace)
        assert denied.value.status == 403
        assert f"system:serviceaccount:{namespace}:reader" in str(denied.value.body)

        await _grant_pod_reading(api, namespace, "reader")
        # RBAC reads its rules from a cache: the grant lands within moments.
        async with asyncio.timeout(60):
            while True:
                try:
                    await client.CoreV1Api(reader).list_namespaced_pod(namespace)
                    break
                except ApiException as err:
                    assert err.status == 403
                    await asyncio.sleep(0.1)


async def _grant_pod_reading(api: client.ApiClient, namespace: str, account: str) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    await rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])],
        ),
    )
    await rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="pod-reader"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="pod-reader"
            ),
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name=account, namespace=namespace)
            ],
        ),
    )
