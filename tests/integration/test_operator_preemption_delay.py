"""The preemption delay counts from a job's last eviction live, read back from its PodGroup.

Job `j` (its own PodGroup, `preemptionDelay: 10s`, high priority) runs in queue `q`
(deserved 0) until queue `r` (deserved 4) reclaims the node: `j` is evicted and its
PodGroup gets `kai.scheduler/last-eviction-timestamp`. The test waits for the delay
to have passed since the PodGroup was created before that eviction happens, so only
the eviction stamp can still hold `j` back. A low-priority pod `l` of the same queue
then takes the free node, and `j`'s pod is created again: `j` may preempt `l`, but
not within 10 s of its own eviction. So `j` first waits with a reason while `l`
keeps running, then preempts it.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

from kai_operator_support import (
    POD_GROUPS,
    bound_pods,
    create_queue,
    delete_queue,
    events_for,
    gpu_pod,
    list_pod_groups,
    operator_config,
    running_operator,
    unique,
    wait_for,
)
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

LAST_EVICTION = "kai.scheduler/last-eviction-timestamp"
DELAY = timedelta(seconds=10)


async def _group(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    for group in await list_pod_groups(api, namespace):
        if group["metadata"]["name"] == name:
            return group
    return {}


def _time(annotations: dict[str, str]) -> datetime:
    return datetime.fromisoformat(annotations[LAST_EVICTION])


def _messages(group: dict[str, Any]) -> list[str]:
    conditions = (group.get("status") or {}).get("schedulingConditions") or []
    return [str(r.get("message")) for c in conditions for r in c.get("reasons") or []]


def _pod(name: str, queue: str, priority_class: str, group: str | None = None) -> client.V1Pod:
    annotations = {"pod-group-name": group} if group else None
    pod = gpu_pod(name, queue, gpus=4, annotations=annotations)
    pod.spec.priority_class_name = priority_class
    return pod


async def test_a_job_evicted_moments_ago_waits_out_its_preemption_delay(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    scheduling = client.SchedulingV1Api(api)
    q, r, job = unique("q"), unique("r"), unique("j")
    high, low = unique("high"), unique("low")
    for name, value in ((high, 60), (low, 10)):  # both preemptible (below 100), high > low
        await scheduling.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
    await create_queue(api, q, gpu_quota=0)
    await create_queue(api, r, gpu_quota=4)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=4, gpu_memory_mib=40960))
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        *POD_GROUPS[:2],
        namespace,
        POD_GROUPS[2],
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": job},
            "spec": {
                "minMember": 1,
                "queue": q,
                "priorityClassName": high,
                "preemptionDelay": f"{DELAY.seconds}s",
            },
        },
    )
    try:
        async with running_operator(operator_config(control_plane.kubeconfig, namespace)):
            await core.create_namespaced_pod(namespace, _pod("j-0", q, high, job))

            async def job_running_past_its_delay() -> bool:
                created = (await _group(api, namespace, job))["metadata"]["creationTimestamp"]
                since = datetime.now(UTC) - datetime.fromisoformat(created)
                return "j-0" in await bound_pods(api, namespace) and since > DELAY * 1.5

            await wait_for("j running, its delay past since creation", job_running_past_its_delay)
            await core.create_namespaced_pod(namespace, gpu_pod("claim", r, gpus=4))

            async def claim_bound() -> bool:
                return (await bound_pods(api, namespace)).get("claim") == node

            await wait_for("r's claim bound after reclaiming j", claim_bound)

            async def eviction_stamped() -> bool:
                annotations = (await _group(api, namespace, job))["metadata"].get("annotations")
                return LAST_EVICTION in (annotations or {})

            await wait_for("j's last-eviction timestamp on its PodGroup", eviction_stamped)
            evicted_at = _time((await _group(api, namespace, job))["metadata"]["annotations"])
            await core.delete_namespaced_pod("claim", namespace, grace_period_seconds=0)
            await core.create_namespaced_pod(namespace, _pod("l", q, low))

            async def low_bound() -> bool:
                return (await bound_pods(api, namespace)).get("l") == node

            await wait_for("the low-priority pod on the free node", low_bound)
            await core.create_namespaced_pod(namespace, _pod("j-1", q, high, job))

            async def job_told_to_wait() -> bool:
                messages = _messages(await _group(api, namespace, job))
                return any("counts from its last eviction" in m for m in messages)

            await wait_for("j's PodGroup saying why it waits", job_told_to_wait)

            async def job_preempted_low() -> bool:
                return (await bound_pods(api, namespace)).get("j-1") == node

            await wait_for("j bound once its delay has passed", job_preempted_low, 90)

            low_evicted: list[datetime] = []

            async def low_eviction_reported() -> bool:  # l's PodGroup went with l: its event stays
                events = await events_for(api, namespace, "l")
                low_evicted[:] = [e.first_timestamp for e in events if e.reason == "Evicted"]
                return bool(low_evicted)

            await wait_for("an Evicted event on l", low_eviction_reported)
            # Not preempted inside the delay, by the cluster's own record (whatever the load).
            waited = min(low_evicted) - evicted_at
            assert waited >= DELAY, f"l was preempted {waited} after j's eviction"
    finally:
        await delete_queue(api, q)
        await delete_queue(api, r)
        for name in (high, low):
            with contextlib.suppress(ApiException):
                await scheduling.delete_priority_class(name)
