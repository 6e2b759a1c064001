"""`kai nodes`: per node and per GPU device, what holds it and what is free; and so for
each device the node offers as an extended resource (an RDMA device, MIG slices).

The arithmetic is the engine's (`kai.engine.capacity.initial_capacity`, the free
capacity every cycle starts from), over pods read by `kai.api.pods` and with the
reservation pods counted by `kai.api.reservations`, so "free" here is what the
scheduler will hand out. Whole GPUs are a count, as in KAI's node model (the
scheduler does not know device indexes); a device opened for sharing is one
`runai-gpu-group`, held by a reservation pod in `kai-resource-reservation`, and
filled by the fractions of the pods labelled with its group, each taking
`gpu-fraction` of the device or `gpu-memory` MiB of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kai.api.constants import RESERVATION_NAMESPACE
from kai.api.host_ports import is_host_port, ports_in_use
from kai.api.node_offers import offering
from kai.api.nodes import parse_node
from kai.api.reservations import counted_reservations
from kai.engine.capacity import NodeCapacity, initial_capacity
from kai.engine.model import Node, Pod
from kai.engine.scalars import MILLI, in_units
from kai.inspect import units
from kai.inspect.lenient import parsed, read_pod


@dataclass(frozen=True)
class Fractional:
    pod: str
    share: Fraction
    """Of one device: its MiB over the device's."""
    memory_mib: int


@dataclass(frozen=True)
class SharedDevice:
    group: str
    reservation: str | None
    """The reservation pod holding the device; None if there is none (KAI would make one)."""
    used_mib: int
    memory_mib: int
    fractions: Sequence[Fractional]

    @property
    def free_share(self) -> Fraction:
        return Fraction(max(self.memory_mib - self.used_mib, 0), self.memory_mib)


@dataclass(frozen=True)
class NodeSummary:
    node: Node
    free: NodeCapacity
    whole: Sequence[tuple[str, int]]
    """Pods holding whole devices (any scheduler's), with how many."""
    shared: Sequence[SharedDevice]
    reserved: Sequence[str]
    """Reservation pods holding a device no pod shares (until they are collected)."""
    here: Sequence[Pod] = ()
    """The pods that hold room on the node, by key."""

    @property
    def free_share(self) -> Fraction:
        return sum((device.free_share for device in self.shared), Fraction(0))

    @property
    def free_gpus(self) -> Fraction:
        return self.free.whole_gpus + self.free_share

    def document(self) -> dict[str, Any]:
        node, free = self.node, self.free
        return {
            "name": node.name,
            "ready": node.ready,
            "unschedulable": node.unschedulable,
            "gpus": node.gpus,
            "gpuMemoryMiB": node.gpu_memory_mib,
            "freeDevices": free.whole_gpus,
            "freeShare": _number(self.free_share),
            "freeGpus": _number(self.free_gpus),
            "wholeGpuPods": [{"pod": pod, "devices": count} for pod, count in self.whole],
            "sharedDevices": [
                {
                    "group": device.group,
                    "reservationPod": device.reservation,
                    "usedMiB": device.used_mib,
                    "freeShare": _number(device.free_share),
                    "pods": [
                        {"pod": f.pod, "share": _number(f.share), "memoryMiB": f.memory_mib}
                        for f in device.fractions
                    ],
                }
                for device in self.shared
            ],
            "idleReservations": list(self.reserved),
            "cpu": {"allocatable": int(node.allocatable.cpu), "free": free.cpu},
            "memory": {"allocatable": int(node.allocatable.memory), "free": free.memory},
            "pods": {"allocatable": node.max_pods, "free": free.pods},
            "scalars": [
                {
                    "name": name,
                    "allocatable": _number(Fraction(amount, MILLI)),
                    "free": _number(Fraction(free.scalars.get(name, 0), MILLI)),
                    "pods": [
                        {"pod": pod, "amount": _number(Fraction(asked, MILLI))}
                        for pod, asked in self.holders(name)
                    ],
                }
                for name, amount in node.scalars
            ],
        }

    def holders(self, resource: str) -> list[tuple[str, int]]:
        """The pods here that hold some of a scalar resource, with how much (thousandths)."""
        return [
            (pod.key, asked) for pod in self.here for name, asked in pod.scalars if name == resource
        ]

    def rows(self, wide: bool) -> list[tuple[str, ...]]:
        node = self.node
        state = "Ready" if node.ready else "NotReady"
        if node.unschedulable:
            state += ",SchedulingDisabled"
        summary = f"{state}, {node.gpu_memory_mib} MiB per device"
        extra = (
            (
                units.amount("cpu", Fraction(self.free.cpu)),
                units.amount("memory", Fraction(self.free.memory)),
                str(self.free.pods),
            )
            if wide
            else ()
        )
        blank = ("",) * len(extra)
        used = node.gpus - self.free_gpus
        gpus, free_gpus = str(node.gpus), units.decimal(self.free_gpus)
        rows: list[tuple[str, ...]] = [
            (node.name, "all", gpus, units.decimal(used), free_gpus, *extra, summary)
        ]
        for pod, count in self.whole:
            rows.append((node.name, "whole", str(count), str(count), "0", *blank, pod))
        for device in self.shared:
            held = ", ".join(f"{f.pod} {units.decimal(f.share)}" for f in device.fractions)
            reservation = device.reservation or "none"
            rows.append(
                (
                    node.name,
                    f"shared:{device.group[:8]}",
                    "1",
                    units.decimal(1 - device.free_share),
                    units.decimal(device.free_share),
                    *blank,
                    f"{held or 'no pod'}; reservation {reservation}",
                )
            )
        for pod in self.reserved:
            rows.append((node.name, "reserved", "1", "1", "0", *blank, f"{pod} (no pod shares it)"))
        if self.free.whole_gpus:
            idle = str(self.free.whole_gpus)
            rows.append((node.name, "free", idle, "0", idle, *blank, ""))
        for name, amount in node.scalars:
            if "/" not in name:
                continue  # hugepages and ephemeral storage: in the document, not the table
            left = self.free.scalars.get(name, 0)
            holders = self.holders(name)
            if is_host_port(name) and all(asked < amount for _, asked in holders):
                # Every node offers every port in use: shown where a pod holds it, on every
                # address or on the one address of its own row.
                continue
            held = ", ".join(f"{pod} {in_units(name, asked)}" for pod, asked in holders)
            rows.append(
                (
                    node.name,
                    name,
                    in_units(name, amount),
                    in_units(name, amount - left),
                    in_units(name, left),
                    *blank,
                    held,
                )
            )
        return rows


@dataclass(frozen=True)
class NodesReport:
    nodes: Sequence[NodeSummary]
    problems: Sequence[str]

    def document(self) -> dict[str, Any]:
        return {"nodes": [n.document() for n in self.nodes], "problems": list(self.problems)}

    def rows(self, wide: bool = False) -> list[tuple[str, ...]]:
        header: tuple[str, ...] = ("NODE", "DEVICE", "COUNT", "USED", "FREE")
        header += ("CPU-FREE", "MEM-FREE", "PODS-FREE") if wide else ()
        rows: list[tuple[str, ...]] = [(*header, "HELD-BY")]
        for node in self.nodes:
            rows += node.rows(wide)
        return rows


def summarise_nodes(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    reservation_namespace: str = RESERVATION_NAMESPACE,
    names: Sequence[str] = (),
) -> NodesReport:
    """Each node (those named, or all) with its devices, from every pod that may be on one."""
    problems: list[str] = []
    parsed_nodes: list[Node] = []
    for manifest in nodes:
        node = _read_node(manifest, problems)
        if node is not None and (not names or node.name in names):
            parsed_nodes.append(node)
    users: list[Pod] = []
    reservations: list[Pod] = []
    for manifest in pods:
        pod = read_pod(manifest, problems)
        if pod is not None:
            (reservations if pod.namespace == reservation_namespace else users).append(pod)
    counted = counted_reservations(reservations, users)
    ports = ports_in_use(users)  # offered as the scheduler offers them, to show who holds one
    parsed_nodes = [offering(node, ports) for node in parsed_nodes]
    capacity = initial_capacity(parsed_nodes, users + counted)
    holders = {pod.gpu_groups[0]: pod.key for pod in reservations if pod.gpu_groups}
    summaries = [
        _summary(node, capacity[node.name], users, counted, holders)
        for node in sorted(parsed_nodes, key=lambda n: n.name)
    ]
    return NodesReport(summaries, problems)


def _read_node(manifest: Mapping[str, Any], problems: list[str]) -> Node | None:
    return parsed(lambda: parse_node(manifest), problems)


def _summary(
    node: Node,
    free: NodeCapacity,
    users: Sequence[Pod],
    counted: Sequence[Pod],
    reservations: Mapping[str, str],
) -> NodeSummary:
    here = sorted(
        (pod for pod in users if pod.node == node.name and pod.phase.occupies_node),
        key=lambda p: p.key,
    )
    fractions: dict[str, list[Fractional]] = {}
    for pod in here:
        if pod.gpu.is_fractional:
            mib = pod.gpu.memory_on(node.gpu_memory_mib)
            share = Fraction(mib, node.gpu_memory_mib)
            for group in pod.gpu_groups:
                fractions.setdefault(group, []).append(Fractional(pod.key, share, mib))
    shared = [
        SharedDevice(
            group,
            reservations.get(group),
            used,
            node.gpu_memory_mib,
            fractions.get(group, []),
        )
        for group, used in sorted(free.shared.items())
    ]
    whole = [(pod.key, pod.gpu.whole) for pod in here if pod.gpu.whole]
    idle = sorted(pod.key for pod in counted if pod.node == node.name and pod.phase.occupies_node)
    return NodeSummary(node, free, whole, shared, idle, here)


def _number(value: Fraction) -> float | int:
    return value.numerator if value.denominator == 1 else float(value)
