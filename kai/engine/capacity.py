"""Free capacity of each node, including the memory left on each shared GPU device.

KAI's node model: whole GPUs are a count; a device opened for sharing leaves the
count and becomes a memory bin (a "GPU group") that fractional pods fill. This
module derives that state from the pods already on the nodes, and offers the
placement primitives (fit, take, give back) that the greedy pass and the decoder
of the solver's answer both use.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kai.engine import scalars
from kai.engine.model import Node, Pod
from kai.engine.resources import Resources, ResourceSum

GROUP_NAMESPACE = uuid.UUID("6f1c8f3e-4f7e-4d1b-9a57-1f2d7c0e5a10")
_GROUP_NAMESPACE_BYTES = GROUP_NAMESPACE.bytes


def new_group_id(node: str, index: int, cycle: str = "") -> str:
    """A fresh id for the index-th device a node opens for sharing in a cycle (a valid label value).

    Deterministic for a snapshot, and new in every cycle (`cycle` is the snapshot's time), as
    KAI makes a fresh id per group: an id a previous cycle used may still name a reservation
    pod that is going away, and a new fraction must not be put on a device nothing will hold.
    """
    # uuid.uuid5's own steps, without building a UUID object to print it: a cycle opens
    # thousands of devices at 5,000 nodes, and the object was most of the id's cost.
    digest = bytearray(
        hashlib.sha1(_GROUP_NAMESPACE_BYTES + f"{node}:{cycle}:{index}".encode()).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = digest.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


@dataclass
class NodeCapacity:
    """What is still free on one node. Mutable: placements take from it and can give back."""

    node: Node
    cpu: int  # millicores
    memory: int  # bytes
    pods: int
    whole_gpus: int
    shared: dict[str, int] = field(default_factory=dict)  # group id -> MiB used on that device
    opened: int = 0  # devices this cycle opened for sharing, to name new groups
    cycle: str = ""  # the cycle's own part of new group ids
    scalars: dict[str, int] = field(default_factory=dict)  # free thousandths (`kai.engine.scalars`)

    @property
    def name(self) -> str:
        return self.node.name

    def copy(self) -> NodeCapacity:
        return NodeCapacity(
            self.node,
            self.cpu,
            self.memory,
            self.pods,
            self.whole_gpus,
            dict(self.shared),
            self.opened,
            self.cycle,
            dict(self.scalars),
        )

    def fits_base(self, pod: Pod) -> bool:
        return (
            self.pods >= 1
            and pod.cpu_millis <= self.cpu
            and pod.memory_bytes <= self.memory
            and pod.gpu.whole <= self.whole_gpus
            and (not pod.scalars or scalars.shortage(pod.scalars, self.scalars) is None)
        )

    def shared_candidates(self, pod: Pod, fullest_first: bool = True) -> list[str] | None:
        """The devices a fractional pod would take here, or None if it does not fit.

        Existing groups with room come first (KAI's gpusharingorder), fullest first for
        bin-packing (gpupack) or emptiest first for spreading; then whole idle devices,
        which would be opened as new groups (named "" until taken).
        """
        need = pod.gpu.memory_on(self.node.gpu_memory_mib)
        if need > self.node.gpu_memory_mib:
            return None
        existing = sorted(
            (
                group
                for group, used in self.shared.items()
                if used + need <= self.node.gpu_memory_mib
            ),
            key=lambda group: (-self.shared[group] if fullest_first else self.shared[group], group),
        )
        chosen = existing[: pod.gpu.devices]
        missing = pod.gpu.devices - len(chosen)
        if missing > self.whole_gpus:
            return None
        return chosen + [""] * missing

    def fits(self, pod: Pod) -> bool:
        if not self.fits_base(pod):
            return False
        return not pod.gpu.is_fractional or self._has_devices_for(pod)

    def has_gpus_for(self, pod: Pod) -> bool:
        """The pod's GPUs alone fit here: idle devices for a whole ask, a device with room
        (or an idle one) for a share."""
        if pod.gpu.is_fractional:
            return self._has_devices_for(pod)
        return pod.gpu.whole <= self.whole_gpus

    def _has_devices_for(self, pod: Pod) -> bool:
        """`shared_candidates(pod) is not None`, counted without ranking the devices: a
        seating asks it of node after node, and the sort was most of a victim search."""
        size = self.node.gpu_memory_mib
        need = pod.gpu.memory_on(size)
        if need > size:
            return False
        missing = pod.gpu.devices - self.whole_gpus
        if missing <= 0:
            return True
        for used in self.shared.values():
            if used + need <= size:
                missing -= 1
                if missing == 0:
                    return True
        return False

    def take(self, pod: Pod, groups: Iterable[str] | None = None) -> tuple[str, ...]:
        """Place the pod here and return the shared groups it sits on. The caller checked `fits`."""
        self.cpu -= pod.cpu_millis
        self.memory -= pod.memory_bytes
        self.pods -= 1
        self.whole_gpus -= pod.gpu.whole
        if pod.scalars:
            scalars.take(self.scalars, pod.scalars)
        if not pod.gpu.is_fractional:
            return ()
        chosen = list(groups) if groups is not None else self.shared_candidates(pod)
        assert chosen is not None, f"{pod.key} does not fit on {self.name}"
        need = pod.gpu.memory_on(self.node.gpu_memory_mib)
        taken: list[str] = []
        for candidate in chosen:
            group = candidate or self._open_group()
            if group not in self.shared:  # replaying a device another pass opened: open it here too
                self.whole_gpus -= 1
            self.shared[group] = self.shared.get(group, 0) + need
            taken.append(group)
        return tuple(taken)

    def _open_group(self) -> str:
        while True:
            group = new_group_id(self.name, self.opened, self.cycle)
            self.opened += 1
            if group not in self.shared:
                return group


def initial_capacity(
    nodes: Iterable[Node], pods: Iterable[Pod], cycle: str = ""
) -> dict[str, NodeCapacity]:
    """Free capacity per node after every pod that occupies a node (any scheduler's) is subtracted."""
    on_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.phase.occupies_node and pod.node is not None:
            on_node.setdefault(pod.node, []).append(pod)
    return {node.name: node_capacity(node, on_node.get(node.name, ()), cycle) for node in nodes}


def node_capacity(node: Node, occupying: Iterable[Pod], cycle: str = "") -> NodeCapacity:
    """Free capacity of one node after the pods that occupy it are subtracted.

    The pods are taken in key order, whatever order they come in, so the same pods give the
    same devices. A running fractional pod whose device is not named (no `runai-gpu-group`
    label) is put on a device deterministically, after the named ones, so its memory is
    accounted all the same.
    """
    cap = NodeCapacity(
        node,
        math.floor(node.allocatable.cpu),
        math.floor(node.allocatable.memory),
        node.max_pods,
        node.gpus,
        cycle=cycle,
        scalars=dict(node.scalars),
    )
    unnamed: list[Pod] = []
    for pod in sorted(occupying, key=lambda p: p.key):
        if pod.gpu.is_fractional and not pod.gpu_groups:
            unnamed.append(pod)
            continue
        cap.cpu -= pod.cpu_millis
        cap.memory -= pod.memory_bytes
        cap.pods -= 1
        cap.whole_gpus -= pod.gpu.whole
        if pod.scalars:
            scalars.take(cap.scalars, pod.scalars)
        if not pod.gpu.is_fractional:
            # A pod of whole devices shares none, whatever groups it is labelled with (a
            # reservation pod whose users are gone): it holds its devices and opens none,
            # as the validator counts it.
            continue
        need = pod.gpu.memory_on(node.gpu_memory_mib)
        for group in pod.gpu_groups:
            if group not in cap.shared:
                cap.whole_gpus -= 1
                cap.shared[group] = 0
            cap.shared[group] += need
    for pod in unnamed:
        candidates = cap.shared_candidates(pod) or [""] * pod.gpu.devices
        cap.take(pod, candidates)
    return cap


def total_allocatable(nodes: Iterable[Node]) -> Resources:
    """The cluster total that fair share divides: allocatable of Ready nodes (kai-semantics §10.1)."""
    total = ResourceSum()  # exact, without a Fraction normalised per node per cycle
    for node in nodes:
        if node.ready:
            total.add(node.allocatable)
            if node.scalar_gpus:  # MIG slices and AMD devices, counted as KAI counts them
                total.add(Resources.of(gpu=node.scalar_gpus))
    return total.total()
