"""A pod bound by a scheduler that stopped before it wrote the pod's group is found again.

During a burst kai binds a new group's pods before it writes the group (their bindings
carry the `pod-group-name` annotation; kai.operator.group_writes). A scheduler stopped
in between leaves a bound pod naming a PodGroup the cluster lacks. The next one must
count that pod toward its queue and write its group, with the start the API server
recorded when it bound the pod: otherwise the queue looks empty and is given more than
its limit, and min-runtime does not protect the group. A bound pod naming some other, missing group (a
user's own) is left as it is: no group is made up for it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kai_operator_support import (
    bound_pods,
    create_queue,
    delete_queue,
    get_queue,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.api.podgroups import LAST_START_ANNOTATION
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

GPU = "nvidia.com/gpu"


async def test_a_bound_pod_whose_group_was_never_written_counts_and_gets_it(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    queue = unique("lost")
    await create_queue(api, queue, gpu_limit=1)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=2, gpu_memory_mib=40960))
    try:
        lost = await core.create_namespaced_pod(namespace, gpu_pod("lost", queue, gpus=1))
        own_group = f"pg-lost-{lost.metadata.uid}"  # the name kai's grouper gives a lone pod
        await _bind(core, namespace, "lost", node, own_group)
        await core.create_namespaced_pod(namespace, gpu_pod("users", unique("other")))
        await _bind(core, namespace, "users", node, "users-own-group")
        await core.create_namespaced_pod(namespace, gpu_pod("waiting", queue, gpus=1))
        config = operator_config(control_plane.kubeconfig, namespace)
        async with running_operator(config):

            async def groups() -> dict[str, dict[str, Any]]:
                return {g["metadata"]["name"]: g for g in await list_pod_groups(api, namespace)}

            async def lost_group_written() -> bool:
                return own_group in await groups()

            await wait_for("the lost pod's group to be written", lost_group_written, timeout=120)

            async def waiting_has_a_reason() -> bool:
                for group in (await groups()).values():
                    owner = group["metadata"]["ownerReferences"][0]["name"]
                    conditions = (group.get("status") or {}).get("schedulingConditions") or []
                    if owner == "waiting" and conditions:
                        return True
                return False

            await wait_for("the waiting pod's reason", waiting_has_a_reason, timeout=120)
            assert "waiting" not in await bound_pods(api, namespace)  # the limit holds

            async def queue_counts_the_lost_pod() -> bool:
                allocated = ((await get_queue(api, queue)).get("status") or {}).get("allocated")
                return (allocated or {}).get(GPU) == "1"

            await wait_for("the queue to count the lost pod", queue_counts_the_lost_pod)
            assert "users-own-group" not in await groups()
            written = (await groups())[own_group]
            assert written["spec"]["queue"] == queue
            # Its start is when the API server bound the pod: min-runtime counts from it.
            pod = await core.read_namespaced_pod("lost", namespace)
            scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
            assert scheduled.status == "True"
            start = written["metadata"]["annotations"][LAST_START_ANNOTATION]
            assert datetime.fromisoformat(start) == scheduled.last_transition_time
    finally:
        await delete_queue(api, queue)


async def _bind(core: client.CoreV1Api, namespace: str, pod: str, node: str, group: str) -> None:
    """Bind as a scheduler does during a burst: the binding carries the group's name."""
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod, annotations={"pod-group-name": group}),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # The generated client cannot read the Status a binding is answered with.
    await core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
