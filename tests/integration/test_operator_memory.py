"""What the operator remembers per pod is forgotten once the pod is gone: a long run does not grow.

A Job whose `kai.scheduler/batch-min-member` cannot be read makes the grouper
report a problem per pod (remembered by pod uid, so the event is not raised every
cycle); once the Job and its pods are deleted, the grouper remembers nothing.
"""

from __future__ import annotations

from kai_operator_support import (
    create_queue,
    delete_queue,
    events_for,
    gpu_job,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client

from kai.testing.controlplane import ClusterAccess

PODS = 3


async def test_grouping_problems_are_forgotten_with_their_pods(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess
) -> None:
    queue = unique("memory")
    await create_queue(api, queue)
    job = gpu_job("unreadable", queue, parallelism=PODS, gpus=1)
    job.metadata.annotations = {"kai.scheduler/batch-min-member": "many"}
    config = operator_config(control_plane.kubeconfig, namespace, leader_election=False)
    try:
        async with running_operator(config) as (operator, _):
            assert operator.grouper.remembered == 0
            await client.BatchV1Api(api).create_namespaced_job(namespace, job)

            async def reported() -> bool:
                pods = await pods_in(api, namespace)
                for pod in pods:
                    events = await events_for(api, namespace, pod.metadata.name)
                    if not any(event.reason == "PodGroupingFailed" for event in events):
                        return False
                return len(pods) == PODS

            await wait_for("a grouping problem reported on every pod", reported, timeout=60)
            assert operator.grouper.remembered == PODS

            await client.BatchV1Api(api).delete_namespaced_job(
                "unreadable", namespace, propagation_policy="Foreground"
            )

            async def forgotten() -> bool:
                return not await pods_in(api, namespace) and operator.grouper.remembered == 0

            await wait_for("the grouper to forget the deleted pods", forgotten, timeout=60)
    finally:
        await delete_queue(api, queue)
