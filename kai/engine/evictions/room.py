"""Trying a scenario on free capacity without touching it: give victims' room back, seat pods, throw away.

Every candidate victim set is tried on a copy-on-write view of the nodes' free
capacity, so that thousands of trials copy only the nodes they touch. Seating
follows KAI's preference (bin-packing: the fullest node that fits; spreading: the
emptiest), one pod at a time, largest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from kai.engine.capacity import NodeCapacity
from kai.engine.model import PlacementStrategy, Pod

Seat = tuple[Pod, str, tuple[str, ...]]
"""A pod, the node it is seated on, and the shared devices it takes there."""


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

    def writable(self, name: str) -> NodeCapacity:
        cap = self.changed.get(name)
        if cap is None:
            cap = self.changed[name] = self.base[name].copy()
        return cap


def release(cap: NodeCapacity, pod: Pod, gpu_groups: tuple[str, ...]) -> None:
    """Give a leaving pod's room back; a shared device nobody uses any more is whole again.

    A fractional pod whose devices are not named keeps its device memory taken: where
    it sat is unknown, so its memory is never counted free twice.
    """
    cap.cpu += pod.request.cpu
    cap.memory += pod.request.memory
    cap.pods += 1
    cap.whole_gpus += pod.gpu.whole
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


def seat_all(
    pods: Sequence[Pod],
    room: Overlay,
    nodes: Iterable[str],
    eligible_for: Callable[[Pod], Callable[[str], bool]],
    strategy: PlacementStrategy,
) -> list[Seat] | None:
    """Seat every pod on `nodes` (largest pods first), or None; `room` is changed either way."""
    candidates = sorted(set(nodes))
    seats: list[Seat] = []
    for pod in sorted(pods, key=_size_order):
        eligible = eligible_for(pod)
        best: tuple[tuple[int, str], str] | None = None
        for name in candidates:
            cap = room[name]
            if not eligible(name) or not cap.fits(pod):
                continue
            free = cap.whole_gpus - pod.gpu.whole
            rank = (free if strategy is PlacementStrategy.BINPACK else -free, name)
            if best is None or rank < best[0]:
                best = (rank, name)
        if best is None:
            return None
        seats.append((pod, best[1], room.writable(best[1]).take(pod)))
    return seats


def _size_order(pod: Pod) -> tuple[int, object, object, str]:
    return (-pod.gpu.whole, -pod.request.cpu, -pod.request.memory, pod.key)
