"""A workload the grouper cannot read is reported on its pod, live, and every other pod is scheduled.

A PyTorchJob custom resource whose CRD keeps any value (as a CRD installed without a
schema does) has `spec.elasticPolicy: "x"`, a string where an object goes; its pod waits
for a PodGroup. Reading it made the grouper fail with an AttributeError, which failed
every cycle while the object existed: no pod of any workload was scheduled. The pod
now gets a PodGroupingFailed event naming the PyTorchJob and the field, and a plain pod
beside it is bound.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kai_operator_support import (
    body,
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    gpu_pod,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"


def _schemaless_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "pytorchjob", "kind": "PyTorchJob"},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


async def _install_crd(api: client.ApiClient) -> bool:
    """Install the CRD; False if it was there already (then it is left in place)."""
    extensions = client.ApiextensionsV1Api(api)
    try:
        await extensions.create_custom_resource_definition(body(_schemaless_crd()))
    except ApiException as error:
        if error.status != 409:
            raise
        return False

    async def established() -> bool:
        crd = await extensions.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        conditions = crd.status.conditions or [] if crd.status else []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    await wait_for("the PyTorchJob CRD established", established)
    return True


async def test_an_unreadable_owner_is_reported_and_the_other_pods_are_scheduled(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    queue = unique("owners")
    await create_queue(api, queue, gpu_quota=2)
    await gpu_nodes(GpuNode(name=unique("gpu"), gpus=2, gpu_memory_mib=40960))
    installed = await _install_crd(api)
    config = operator_config(control_plane.kubeconfig, namespace)
    try:
        job = await custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "PyTorchJob",
                "metadata": {"name": "train"},
                "spec": {
                    "elasticPolicy": "x",
                    "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {}}},
                },
            },
        )
        worker = gpu_pod("train-master-0", queue, gpus=1)
        worker.metadata.owner_references = [
            client.V1OwnerReference(
                api_version=f"{GROUP}/{VERSION}",
                kind="PyTorchJob",
                name="train",
                uid=job["metadata"]["uid"],
                controller=True,
            )
        ]
        await core.create_namespaced_pod(namespace, worker)
        await core.create_namespaced_pod(namespace, gpu_pod("plain", queue, gpus=1))
        async with running_operator(config):

            async def reported() -> bool:
                events = await events_for(api, namespace, "train-master-0")
                return any(
                    e.reason == "PodGroupingFailed"
                    and f"PyTorchJob {namespace}/train" in (e.message or "")
                    and "spec.elasticPolicy: an object expected" in (e.message or "")
                    for e in events
                )

            await wait_for("the unreadable PyTorchJob reported on its pod", reported)

            async def plain_bound() -> bool:
                return "plain" in await bound_pods(api, namespace)

            await wait_for("the plain pod bound beside it", plain_bound)
            assert "train-master-0" not in await bound_pods(api, namespace)
    finally:
        # Gone before the next test: the grouper of any later operator would report it too.
        for name in ("train-master-0", "plain"):
            with contextlib.suppress(ApiException):
                await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

        async def pods_gone() -> bool:
            return not await pods_in(api, namespace)

        await wait_for("the test's pods deleted", pods_gone)
        with contextlib.suppress(ApiException):
            await custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "train")
        if installed:
            await client.ApiextensionsV1Api(api).delete_custom_resource_definition(
                f"{PLURAL}.{GROUP}"
            )
        await delete_queue(api, queue)
