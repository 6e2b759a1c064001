"""A pod that requires a ConfigMap waits for it, through the real API server and `kai run`.

KAI's ConfigMap predicate: a pod reads ConfigMap `settings` into its environment; while
it does not exist, the pod is not bound (kube-scheduler would bind it, and the kubelet
would hold it on its node with its GPU taken) and is told which one it waits for; once
the ConfigMap is made, the pod is bound.
"""

from __future__ import annotations

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

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory


async def test_a_pod_waits_for_the_config_map_it_reads_then_is_bound(
    api: client.ApiClient,
    namespace: str,
    gpu_nodes: NodeFactory,
    control_plane: ClusterAccess,
) -> None:
    core = client.CoreV1Api(api)
    pool = {"kai-test/config-maps": unique("pool")}
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=2, gpu_memory_mib=40960, topology=pool))
    config = operator_config(control_plane.kubeconfig, namespace)
    async with a_queue(api, "cm") as queue, running_operator(config):
        pod = gpu_pod("reader", queue, gpus=1)
        pod.spec.node_selector = pool
        source = client.V1ConfigMapEnvSource(name="settings")
        pod.spec.containers[0].env_from = [client.V1EnvFromSource(config_map_ref=source)]
        await core.create_namespaced_pod(namespace, pod)

        async def told() -> bool:
            return "reader" not in await bound_pods(api, namespace) and (
                await told_unschedulable(
                    api,
                    namespace,
                    "reader",
                    f"missing required ConfigMaps in namespace {namespace}: settings",
                )
            )

        await wait_for("the pod told it waits for its ConfigMap", told)
        settings = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="settings"), data={"mode": "fast"}
        )
        await core.create_namespaced_config_map(namespace, settings)

        async def bound() -> bool:
            return (await bound_pods(api, namespace)).get("reader") == node

        await wait_for("the pod bound once its ConfigMap exists", bound)
