"""Trying a scenario on free capacity without touching it: give victims' room back, seat pods, throw away.

Every candidate victim set is tried on a copy-on-write view of the nodes' free
capacity, so that thousands of trials copy only the nodes they touch. Seating
follows KAI's preference (bin-packing: the fullest node that fits; spreading: the
emptiest), one pod at a time, largest first.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from kai.engine import scalars
from kai.engine.capacity import NodeCapacity, node_capacity
from kai.engine.model import Node, PlacementStrategy, Pod

Seat = tuple[Pod, str, tuple[str, ...]]
"""A pod, the node it is seated on, and the shared devices it takes there."""


class Meter(Protocol):
    """Counts work done, so that a search can stop when its budget is spent."""

    def spend(self, units: int) -> None: ...


class Overlay(Mapping[str, NodeCapacity]):
    """Free capacity per node: reads fall through to the base, the first write copies the node.

    An overlay is itself a mapping, so a trial can be layered on a trial and dropped.
    """

    def __init__(self, base: Mapping[str, NodeCapacity]) -> None:
        self.base = base
        self.changed: dict[str, NodeCapacity] = {}

    def __getitem__(self, name: str) -> NodeCapacity:
        return self.changed.get(name) or self.base[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)

    def current(self) -> dict[str, NodeCapacity]:
        """Every node's capacity as this overlay sees it, in one plain dict: for a caller that
        reads every node (a seating ranks them all), one copy made in C instead of a lookup
        through each layer per node (`seat_all` ran 440,000 of them in a 1,000-node cycle)."""
        view = self.base.current() if isinstance(self.base, Overlay) else dict(self.base)
        view.update(self.changed)
        return view

    def writable(self, name: str) -> NodeCapacity:
        cap = self.changed.get(name)
        if cap is None:
            cap = self.changed[name] = self.base[name].copy()
        return cap


class IdleRoom(Mapping[str, NodeCapacity]):
    """Free capacity per node with nothing gone yet: every pod on a node stays (Releasing ones
    and this cycle's victims too), and the seats given (`take`) are taken where they fit.

    A node is worked out when first read: a decision looks at the nodes a few pods fit on,
    and building every node's took 15 ms of a 1,000-node cycle."""

    def __init__(self, nodes: Iterable[Node], pods: Iterable[Pod], cycle: str) -> None:
        self._nodes = {node.name: node for node in nodes}
        self._pods = pods
        self._on_node: dict[str, list[Pod]] | None = None
        self._seats: dict[str, list[Seat]] = {}
        self._built: dict[str, NodeCapacity] = {}
        self._cycle = cycle

    def __getitem__(self, name: str) -> NodeCapacity:
        cap = self._built.get(name)
        if cap is None:
            if self._on_node is None:
                self._on_node = {}
                for pod in self._pods:
                    if pod.phase.occupies_node and pod.node is not None:
                        self._on_node.setdefault(pod.node, []).append(pod)
            cap = node_capacity(self._nodes[name], self._on_node.get(name, ()), self._cycle)
            self._built[name] = cap
            for seat in self._seats.pop(name, ()):
                self._take(cap, seat)
        return cap

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def take(self, seat: Seat) -> None:
        """The seat takes its room here if it fits without anything leaving; a seat that
        does not waits for releasing room, which idle capacity never counted."""
        cap = self._built.get(seat[1])
        if cap is None:
            self._seats.setdefault(seat[1], []).append(seat)
        else:
            self._take(cap, seat)

    @staticmethod
    def _take(cap: NodeCapacity, seat: Seat) -> None:
        if fits_as_seated(cap, seat):
            cap.take(seat[0], seat[2])


def release(cap: NodeCapacity, pod: Pod, gpu_groups: tuple[str, ...]) -> None:
    """Give a leaving pod's room back; a shared device nobody uses any more is whole again.

    A fractional pod whose devices are not named keeps its device memory taken: where
    it sat is unknown, so its memory is never counted free twice.
    """
    cap.cpu += pod.cpu_millis
    cap.memory += pod.memory_bytes
    cap.pods += 1
    cap.whole_gpus += pod.gpu.whole
    if pod.scalars:
        scalars.give_back(cap.scalars, pod.scalars)
    if not pod.gpu.is_fractional:
        return
    need = pod.gpu.memory_on(cap.node.gpu_memory_mib)
    for group in gpu_groups:
        if group not in cap.shared:
            continue
        cap.shared[group] -= need
        if cap.shared[group] <= 0:
            del cap.shared[group]
            cap.whole_gpus += 1


class RankedRoom:
    """A room's nodes in seating order (`seating_rank`), worked out once for the many
    seatings tried on overlays of it: on a busy cluster nearly every node has fewer idle
    GPUs than any whole ask, and ranking every node for every seating was most of a victim
    search. The owner of `base` changes a node there through `change`."""

    def __init__(self, base: Mapping[str, NodeCapacity], spread: bool) -> None:
        self.base, self.spread = base, spread
        self.ranks = sorted(seating_rank(cap, name, spread) for name, cap in base.items())

    def change(self, name: str, change: Callable[[NodeCapacity], object]) -> None:
        """Apply `change` to the node in `base`, and move it to its new place in the order."""
        cap = self.base[name]
        del self.ranks[bisect.bisect_left(self.ranks, seating_rank(cap, name, self.spread))]
        change(cap)
        bisect.insort(self.ranks, seating_rank(cap, name, self.spread))

    def with_idle(self, least: int) -> list[tuple[int, str]]:
        """The ranks of the base's nodes with at least `least` idle GPUs, in order."""
        ranks = self.ranks
        if self.spread:  # (-idle, name): the nodes with enough idle GPUs come first
            return ranks[: bisect.bisect_left(ranks, (1 - least, ""))]
        return ranks[bisect.bisect_left(ranks, (least, "")) :]  # (idle, name): they come last

    def order(self, room: Overlay, names: set[str], least: int) -> list[tuple[int, str]] | None:
        """The ranks of `names` with at least `least` idle GPUs in `room`; None unless `room`
        is an overlay of `base`."""
        changed: set[str] = set()
        layer: Mapping[str, NodeCapacity] = room
        while isinstance(layer, Overlay):
            changed.update(layer.changed)
            layer = layer.base
        if layer is not self.base:
            return None
        enough = self.with_idle(least)
        order = [rank for rank in enough if rank[1] in names and rank[1] not in changed]
        for name in changed & names:
            cap = room[name]
            if cap.whole_gpus >= least:
                order.append(seating_rank(cap, name, self.spread))
        order.sort()
        return order


def seat_all(
    pods: Sequence[Pod],
    room: Overlay,
    nodes: Iterable[str],
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    strategy: PlacementStrategy,
    meter: Meter | None = None,
    devices: Callable[[Pod, NodeCapacity], list[str] | None] | None = None,
    ranked: RankedRoom | None = None,
) -> list[Seat] | None:
    """Seat every pod on `nodes` (largest pods first), or None; `room` is changed either way.

    Nodes are kept ordered by free whole GPUs (fewest first to bin-pack, most first to
    spread), so each pod takes the first node that fits instead of scanning them all.
    `devices` chooses a fractional pod's shared devices on a node (None: it does not fit
    there); by default the node's own choice (`NodeCapacity.shared_candidates`).
    `ranked`: the ranking of the room `room` overlays, when the caller keeps one.
    Every node looked at is charged to `meter`.
    """
    spread = strategy is PlacementStrategy.SPREAD
    names = set(nodes)
    # A node with fewer idle GPUs than the smallest whole ask is never taken (packing starts
    # at the pod's ask, spreading stops there, and seating only lowers a node's count), so
    # it is looked at but not ranked: on a busy cluster that is most of them.
    least = min((pod.gpu.whole for pod in pods), default=0)
    order = None if ranked is None else ranked.order(room, names, least)
    if order is None:
        now = room.current()
        order = sorted(
            seating_rank(cap, name, spread)
            for name in names
            if (cap := now[name]).whole_gpus >= least
        )
    seats: list[Seat] = []
    visited = len(names)
    for pod in sorted(pods, key=size_order):
        eligible = eligible_for(pod)
        found = None
        if pod.nominated_node is not None:
            found = _nominated_position(order, pod, eligible, room, devices)
        if found is None:
            found, looked = _first_fit(order, pod, eligible, room, devices, spread)
            visited += looked
        if found is None:
            if meter is not None:
                meter.spend(visited)
            return None
        name = order.pop(found)[1]
        cap = room.writable(name)
        groups = devices(pod, cap) if devices is not None and pod.gpu.is_fractional else None
        seats.append((pod, name, cap.take(pod, groups)))
        bisect.insort(order, seating_rank(cap, name, spread))
    if meter is not None:
        meter.spend(visited)
    return seats


def _first_fit(
    order: Sequence[tuple[int, str]],
    pod: Pod,
    eligible: Callable[[str], bool],
    room: Overlay,
    devices: Callable[[Pod, NodeCapacity], list[str] | None] | None,
    spread: bool,
) -> tuple[int | None, int]:
    """Where in `order` the first node the pod may go to and fits is, and how many nodes
    were looked at."""
    start = 0 if spread else bisect.bisect_left(order, (pod.gpu.whole, ""))
    looked = 0
    for position in range(start, len(order)):
        looked += 1
        free, name = order[position]
        if spread and -free < pod.gpu.whole:
            break
        if eligible(name) and _fits(room[name], pod, devices):
            return position, looked
    return None, looked


def _nominated_position(
    order: Sequence[tuple[int, str]],
    pod: Pod,
    eligible: Callable[[str], bool],
    room: Overlay,
    devices: Callable[[Pod, NodeCapacity], list[str] | None] | None,
) -> int | None:
    """Where in `order` the pod's nominated node is, if the pod may go there and fits: it
    is tried first, as the allocation tries it (`NodeIndex.nominated`)."""
    name = pod.nominated_node
    if name is None or not eligible(name):
        return None
    position = next((i for i, (_, node) in enumerate(order) if node == name), None)
    if position is None or not _fits(room[name], pod, devices):
        return None
    return position


def _fits(
    cap: NodeCapacity, pod: Pod, devices: Callable[[Pod, NodeCapacity], list[str] | None] | None
) -> bool:
    if devices is None or not pod.gpu.is_fractional:
        return cap.fits(pod)
    return cap.fits_base(pod) and devices(pod, cap) is not None


def fits_as_seated(cap: NodeCapacity, seat: Seat) -> bool:
    """Whether `cap` has room for the pod on the devices the seat gave it."""
    pod, _, groups = seat
    if not pod.gpu.is_fractional:
        return cap.fits(pod)
    if not cap.fits_base(pod):
        return False
    size = cap.node.gpu_memory_mib
    need = pod.gpu.memory_on(size)
    opened = sum(1 for group in groups if group not in cap.shared)
    return opened <= cap.whole_gpus and all(
        cap.shared[group] + need <= size for group in groups if group in cap.shared
    )


def own_devices_first(pod: Pod, cap: NodeCapacity) -> list[str] | None:
    """A fractional pod back on its own node takes its own devices again if they have room
    (a device it alone used, now whole again, is reopened under its old name)."""
    if (
        cap.name == pod.node
        and pod.gpu_groups
        and fits_as_seated(cap, (pod, cap.name, pod.gpu_groups))
    ):
        return list(pod.gpu_groups)
    return cap.shared_candidates(pod)


def seating_rank(cap: NodeCapacity, name: str, spread: bool) -> tuple[int, str]:
    """KAI's node order for seating: fewest free whole GPUs first to bin-pack, most to spread."""
    return (-cap.whole_gpus if spread else cap.whole_gpus, name)


def size_order(pod: Pod) -> tuple[int, object, object, str]:
    """The order pods are seated in: the largest first."""
    return (-pod.gpu.whole, -pod.request.cpu, -pod.request.memory, pod.key)
