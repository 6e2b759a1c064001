"""The live CLI shows what the scheduler wrote, on the real control plane.

The operator runs in process and schedules a parent queue's two children: a
whole-GPU pod and a gang in one, two half-GPU pods sharing a device in the other,
the gang refused by its queue's limit. Then `kai queues`, `kai why` and `kai nodes`
run as the user runs them (a process, with the kubeconfig), and what they print is
checked against the objects the scheduler wrote, read by the test itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from kai_operator_support import (
    create_queue,
    delete_queue,
    ensure_namespace,
    get_queue,
    gpu_job,
    gpu_pod,
    list_pod_groups,
    operator_config,
    pods_in,
    running_operator,
    unique,
    wait_bound,
    wait_for,
)
from kubernetes_asyncio import client

from kai.api.quantity import parse_quantity
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

REPO_ROOT = Path(__file__).resolve().parents[2]
RESERVATIONS = "kai-resource-reservation"
GPU = "nvidia.com/gpu"
STATUS_MEASURES = ("allocated", "allocatedNonPreemptible", "requested", "fairShare", "deserved")


async def kai(kubeconfig: Path, *argv: str) -> str:
    """`kai ARGV...` as a process (the operator keeps running on this event loop); its stdout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kai.cli.main",
        *argv,
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    out, err = await process.communicate()
    assert process.returncode == 0, f"kai {' '.join(argv)} exited {process.returncode}: {err!r}"
    return out.decode()


def _engine_units(resource_list: dict[str, str]) -> dict[str, float | int]:
    """A status ResourceList as numbers: GPU devices, CPU millicores, memory bytes."""
    gpu = parse_quantity(resource_list.get(GPU, "0"))
    cpu = parse_quantity(resource_list.get("cpu", "0"))
    memory = parse_quantity(resource_list.get("memory", "0"))
    return {
        "gpu": int(gpu) if gpu.denominator == 1 else float(gpu),
        "cpu": int(cpu if cpu == -1 else cpu * 1000),
        "memory": int(memory),
    }


async def test_queues_why_and_nodes_show_what_the_scheduler_wrote(
    api: client.ApiClient, namespace: str, gpu_nodes: NodeFactory, control_plane: ClusterAccess
) -> None:
    core = client.CoreV1Api(api)
    kubeconfig = control_plane.kubeconfig
    await ensure_namespace(api, RESERVATIONS)
    parent, team_a, team_b = unique("research"), unique("team-a"), unique("team-b")
    await create_queue(api, parent, gpu_quota=4)
    await create_queue(api, team_a, gpu_quota=2, gpu_limit=2, parent=parent)
    await create_queue(api, team_b, gpu_quota=2, parent=parent)
    node = unique("gpu")
    await gpu_nodes(GpuNode(name=node, gpus=4, gpu_memory_mib=40960))
    try:
        async with running_operator(operator_config(kubeconfig, namespace)):
            await core.create_namespaced_pod(namespace, gpu_pod("whole", team_a, gpus=1))
            for name in ("half-a", "half-b"):
                half = gpu_pod(name, team_b, annotations={"gpu-fraction": "0.5"})
                await core.create_namespaced_pod(namespace, half)
            await wait_bound(api, namespace, 3)  # before the gang, which would take the room
            gang = gpu_job("gang", team_a, parallelism=2, gpus=1, min_member=2)
            await client.BatchV1Api(api).create_namespaced_job(namespace, gang)
            theirs = gpu_pod("theirs", team_a)
            theirs.spec.scheduler_name = "default-scheduler"  # nothing schedules it here
            await core.create_namespaced_pod(namespace, theirs)

            seen: list[object] = []

            async def settled() -> bool:
                statuses = [(await get_queue(api, q)).get("status") or {} for q in (team_a, team_b)]
                a, b = (s.get("requested", {}).get(GPU) for s in statuses)
                refused = [_reason(g) for g in await list_pod_groups(api, namespace) if _reason(g)]
                bound = sorted(
                    p.metadata.name for p in await pods_in(api, namespace) if p.spec.node_name
                )
                seen[:] = [a, b, refused, bound]
                return (a, b, len(refused), len(bound)) == ("3", "1", 1, 3)

            what = "three pods bound, the gang refused and queue totals written"
            try:
                await wait_for(what, settled)
            except AssertionError as error:
                raise AssertionError(
                    f"{error}; seen (requested a, b; refused; bound) {seen}"
                ) from None
            (gang_group,) = [g for g in await list_pod_groups(api, namespace) if _reason(g)]
            gang_reason = _reason(gang_group)
            assert gang_reason is not None
            reason, message = gang_reason
            assert reason == "OverLimit"
            assert f"queue {team_a}: limit 2 GPUs, allocated 1 GPUs, this gang needs 2 GPUs" in (
                message
            )
            queues = {q: await get_queue(api, q) for q in (parent, team_a, team_b)}
            pods = {p.metadata.name: p for p in await pods_in(api, namespace)}

            await _check_queues(kubeconfig, queues, parent, team_a, team_b)
            group_name = gang_group["metadata"]["name"]
            await _check_why(kubeconfig, namespace, group_name, message, pods)
            await _check_nodes(kubeconfig, core, node, namespace, pods)
    finally:
        for name in (team_a, team_b, parent):
            await delete_queue(api, name)


async def _check_queues(
    kubeconfig: Path, queues: dict[str, dict[str, Any]], parent: str, team_a: str, team_b: str
) -> None:
    document = json.loads(await kai(kubeconfig, "queues", "-o", "json"))
    shown = {q["name"]: q for q in document["queues"]}
    for name, queue in queues.items():
        for measure in STATUS_MEASURES:
            assert shown[name][measure] == _engine_units(queue["status"][measure]), (name, measure)
    assert shown[team_a]["allocated"]["gpu"] == 1
    assert shown[team_b]["allocated"]["gpu"] == 1  # two halves of one device
    assert shown[parent]["allocated"]["gpu"] == 2
    assert shown[parent]["requested"]["gpu"] == 4
    assert shown[team_a]["quota"]["gpu"] == 2 and shown[team_a]["limit"]["gpu"] == 2
    assert (shown[team_a]["parent"], shown[team_a]["depth"]) == (parent, 1)
    assert shown[team_a]["pending"] == {"podGroups": 1, "pods": 2, "reasons": {"OverLimit": 1}}
    assert shown[parent]["pending"] == shown[team_a]["pending"]
    assert shown[team_b]["pending"] == {"podGroups": 0, "pods": 0, "reasons": {}}

    table = (await kai(kubeconfig, "queues")).splitlines()
    assert table[0].split() == [
        "QUEUE",
        "GPU-DESERVED",
        "GPU-FAIRSHARE",
        "GPU-ALLOCATED",
        "GPU-REQUESTED",
        "GPU-LIMIT",
        "PENDING-GROUPS",
        "PENDING-PODS",
    ]
    rows = {line.split()[0]: (index, line) for index, line in enumerate(table)}
    (top, top_line), (a_at, a_line), (b_at, b_line) = (rows[q] for q in (parent, team_a, team_b))
    assert top_line.startswith(parent) and a_line.startswith(f"  {team_a}")
    assert b_line.startswith(f"  {team_b}")
    assert top < a_at < b_at  # the children follow their parent, in name order
    deserved = shown[team_a]["deserved"]["gpu"]
    fair = shown[team_a]["fairShare"]["gpu"]
    assert a_line.split()[1:] == [str(deserved), str(fair), "1", "3", "2", "1", "2"]


async def _check_why(
    kubeconfig: Path,
    namespace: str,
    group: str,
    message: str,
    pods: dict[str, client.V1Pod],
) -> None:
    text = await kai(kubeconfig, "why", f"podgroup/{group}", "-n", namespace)
    lines = text.splitlines()
    assert "Reason:     OverLimit" in lines[3]
    assert f"Message:    {message}" in lines
    gang_pods = sorted(name for name in pods if name.startswith("gang-"))
    assert len(gang_pods) == 2
    for name in gang_pods:
        assert any(line.split()[:4] == [name, "Pending", "<none>", "1"] for line in lines), text

    answer = json.loads(await kai(kubeconfig, "why", gang_pods[0], "-n", namespace, "-o", "json"))
    assert answer["pod"] == f"{namespace}/{gang_pods[0]}"
    assert answer["podGroup"] == f"{namespace}/{group}"
    assert (answer["reason"], answer["message"], answer["pendingPods"]) == (
        "OverLimit",
        message,
        2,
    )
    assert answer["queueGpus"]["allocated"] == 1 and answer["queueGpus"]["limit"] == 2
    assert any(e["reason"] == "Unschedulable" for e in answer["events"])

    listing = (await kai(kubeconfig, "why", "-n", namespace)).splitlines()
    assert listing[0].split()[:4] == ["PODGROUP", "QUEUE", "PENDING", "REASON"]
    assert [line.split()[0] for line in listing[1:]] == [group]
    assert listing[1].split()[2:4] == ["2", "OverLimit"]

    theirs = await kai(kubeconfig, "why", "theirs", "-n", namespace)
    assert f"Pod {namespace}/theirs is scheduled by default-scheduler, not kai-scheduler" in theirs


async def _check_nodes(
    kubeconfig: Path,
    core: client.CoreV1Api,
    node: str,
    namespace: str,
    pods: dict[str, client.V1Pod],
) -> None:
    group = pods["half-a"].metadata.labels["runai-gpu-group"]
    assert pods["half-b"].metadata.labels["runai-gpu-group"] == group  # one shared device
    listing = await core.list_namespaced_pod(
        RESERVATIONS, label_selector=f"runai-gpu-group={group}"
    )
    (reservation,) = [p.metadata.name for p in listing.items]

    (shown,) = json.loads(await kai(kubeconfig, "nodes", node, "-o", "json"))["nodes"]
    assert (shown["gpus"], shown["freeDevices"], shown["freeShare"]) == (4, 2, 0)
    assert shown["wholeGpuPods"] == [{"pod": f"{namespace}/whole", "devices": 1}]
    (device,) = shown["sharedDevices"]
    assert device["group"] == group
    assert device["reservationPod"] == f"{RESERVATIONS}/{reservation}"
    assert [(p["pod"], p["share"]) for p in device["pods"]] == [
        (f"{namespace}/half-a", 0.5),
        (f"{namespace}/half-b", 0.5),
    ]
    assert device["freeShare"] == 0

    table = (await kai(kubeconfig, "nodes", node)).splitlines()
    assert table[1].split()[:5] == [node, "all", "4", "2", "2"]
    shared = next(line for line in table if f"shared:{group[:8]}" in line)
    assert shared.split()[2:5] == ["1", "1", "0"]
    assert f"{namespace}/half-a 0.5, {namespace}/half-b 0.5" in shared
    assert f"reservation {RESERVATIONS}/{reservation}" in shared
    assert any(line.split()[1:3] == ["free", "2"] for line in table)


def _reason(group: dict[str, Any]) -> tuple[str, str] | None:
    conditions = (group.get("status") or {}).get("schedulingConditions") or []
    if not conditions:
        return None
    first = conditions[0]["reasons"][0]
    return first["reason"], first["message"]
