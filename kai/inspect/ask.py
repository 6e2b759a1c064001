"""The three questions of the live CLI, each read from the cluster and summarised.

`kai.cli.live` parses arguments and prints; what to read for a question and which
summariser answers it is decided here, so the command stays a thin adapter.
"""

from __future__ import annotations

import asyncio
import dataclasses

from kai.inspect.lenient import group_name_of, text
from kai.inspect.nodes import NodesReport, summarise_nodes
from kai.inspect.queues import QueuesReport, summarise_queues
from kai.inspect.read import PODS_ON_NODES, WAITING_PODS, ClusterReader
from kai.inspect.why import (
    GroupAnswer,
    PodAnswer,
    Target,
    explain_group,
    pending_groups,
    pod_answer,
)


class NotFoundError(Exception):
    """The object a question is about does not exist."""


async def ask_queues(cluster: ClusterReader) -> QueuesReport:
    queues, groups, pods = await asyncio.gather(
        cluster.queues(), cluster.pod_groups(None), cluster.pods(None, WAITING_PODS)
    )
    return summarise_queues(queues, groups, pods)


async def ask_nodes(
    cluster: ClusterReader, names: list[str], reservation_namespace: str
) -> NodesReport:
    nodes, pods = await asyncio.gather(cluster.nodes(), cluster.pods(None, PODS_ON_NODES))
    missing = sorted(set(names) - {text(node, "metadata", "name") for node in nodes})
    if missing:
        raise NotFoundError(f"no node named {', '.join(missing)}")
    return summarise_nodes(nodes, pods, reservation_namespace, names)


async def ask_pending(cluster: ClusterReader, namespace: str | None) -> list[GroupAnswer]:
    """Every PodGroup with a waiting pod, in the namespace (None: in all)."""
    groups, pods = await asyncio.gather(
        cluster.pod_groups(namespace), cluster.pods(namespace, WAITING_PODS)
    )
    return pending_groups(groups, pods)


async def ask_why(
    cluster: ClusterReader, namespace: str, target: Target
) -> GroupAnswer | PodAnswer:
    """Why the pod or PodGroup waits; NotFoundError when it does not exist."""
    pod = None
    group_name = target.name
    if target.kind == "pod":
        pod = await cluster.pod(namespace, target.name)
        if pod is None:
            raise NotFoundError(f"pod {namespace}/{target.name} not found")
        sentence = pod_answer(pod)
        if sentence is not None:
            return sentence
        group_name = group_name_of(pod) or ""
    group = await cluster.pod_group(namespace, group_name)
    if group is None and pod is None:
        raise NotFoundError(f"podgroup {namespace}/{group_name} not found")
    about = [group_name] + ([target.name] if pod is not None else [])
    queue_name = text(group, "spec", "queue") if group is not None else ""
    queue = await cluster.queue(queue_name) if queue_name else None
    pods, *events = await asyncio.gather(
        cluster.pods(namespace), *(cluster.events(namespace, name) for name in about)
    )
    answer = explain_group(
        f"{namespace}/{group_name}",
        group,
        pods,
        [event for found in events for event in found],
        {queue_name: queue} if queue is not None else {},
    )
    return dataclasses.replace(answer, pod=f"{namespace}/{target.name}") if pod else answer
