"""Fast lookup of a node for one pod, in KAI's node preference order, over mutable free capacity.

Scanning every node for every pod is too slow at thousands of each. Nodes are kept
in buckets by free whole GPUs, so a GPU pod looks only at nodes with enough of
them, fullest first for bin-packing or emptiest first for spreading. The index
supports checkpoints so that a gang that does not fit whole leaves no trace.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import cast

from kai.engine.capacity import NodeCapacity
from kai.engine.cpu_balance import CpuBalance
from kai.engine.fragmentation import Fragmentation, Growth, shape_of
from kai.engine.model import PlacementStrategy, Pod


class NodeIndex:
    def __init__(
        self,
        capacity: Mapping[str, NodeCapacity],
        strategy: PlacementStrategy,
        device_strategy: PlacementStrategy | None = None,
        fragmentation: Fragmentation | None = None,
        balance: CpuBalance | None = None,
    ) -> None:
        # Copied on write: a cycle's index changes a few nodes of thousands, and the free
        # capacity it starts from is the memo's, shared by every index of the cycle.
        self.capacity: dict[str, NodeCapacity] = dict(capacity)
        self._written: set[str] = set()
        self._strategy = strategy
        self._fullest_device_first = (device_strategy or strategy) is not PlacementStrategy.SPREAD
        self._max_gpus = max((cap.node.gpus for cap in self.capacity.values()), default=0)
        self._buckets: list[list[str]] = [[] for _ in range(self._max_gpus + 1)]
        for name in sorted(self.capacity):
            self._buckets[max(0, self.capacity[name].whole_gpus)].append(name)
        # Shared devices by their free memory, per device size, for fractions under
        # bin-packing: built at the first one, then kept as nodes change.
        self._rooms: dict[int, list[tuple[int, str]]] | None = None
        # Checkpoints nest (a topology search tries a sub-group's domains inside a group's):
        # each holds the nodes' capacity as it was when that checkpoint began.
        self._saved: list[dict[str, NodeCapacity]] = []
        # Fragmentation-aware bin-packing ranks node states, not nodes: nodes in the same
        # state are interchangeable, and there are far fewer states than nodes. The states
        # are tracked from the first pod placed alone: a pass of gangs only never needs them.
        self._fragmentation = fragmentation or None
        self._state_of: dict[str, int] = {}  # node -> the number of its state
        self._states: dict[int, list[str]] | None = None  # state number -> its nodes, by name
        # Idle whole GPUs -> the states with that many (a state fixes them): a pod asking
        # for n looks only at states with n or more, most of a busy cluster's states fewer.
        self._by_level: dict[int, set[int]] = {}
        # The cluster's cores per GPU: given (a memo's), or worked out at the first pod
        # placed alone.
        self._balance = balance

    # -- checkpoints ---------------------------------------------------------------------
    def begin(self) -> None:
        self._saved.append({})

    def commit(self) -> None:
        done = self._saved.pop()
        if self._saved:  # the enclosing checkpoint must still be able to undo these
            outer = self._saved[-1]
            for name, saved in done.items():
                outer.setdefault(name, saved)

    def rollback(self) -> None:
        for name, saved in self._saved.pop().items():
            self._move(name, functools.partial(_restore, saved=saved))

    # -- placement -----------------------------------------------------------------------
    def find(self, pod: Pod, eligible: Callable[[str], bool], alone: bool = False) -> str | None:
        """The best node for the pod, or None.

        A pod placed `alone` (not one member of a gang placed whole) goes where it adds the
        least fragmentation, when the index measures it. A gang's members do not: the
        measure, blind to the members still to come, spreads them to keep room for the
        workload's mix, and the last members find no node (on the synthetic benchmark the
        greedy pass placed 0.5% fewer GPUs); KAI's order keeps a gang together. Nor does a
        pod that asks for a scalar resource (`kai.engine.scalars`): the measure's node
        states leave those out, so a state's first node could not stand for the others.

        Bin-packing puts a fraction on a node whose shared devices have room first (KAI's
        gpusharingorder); spreading ranks nodes by free GPUs first, as KAI's spread score
        outweighs the sharing one, and a node with room on a shared device counts.
        """
        if pod.nominated_node is not None:  # rare: the attribute spares most calls a call
            nominated = self.nominated(pod, eligible)
            if nominated is not None:
                return nominated
        if alone and self._fragmentation is not None and not pod.scalars:
            return self._least_fragmenting(pod, eligible, self._fragmentation)
        spread = self._strategy is PlacementStrategy.SPREAD
        if pod.gpu.is_fractional and not spread:
            for name in self._sharing_candidates(pod):
                if eligible(name) and self.capacity[name].fits(pod):
                    return name
        least = 0 if spread and pod.gpu.is_fractional else pod.gpu.whole + pod.gpu.is_fractional
        for name in self._bucket_scan(least):
            if eligible(name) and self.capacity[name].fits(pod):
                return name
        return None

    def nominated(self, pod: Pod, eligible: Callable[[str], bool]) -> str | None:
        """The node in the pod's `status.nominatedNodeName`, if the pod may go there and fits.

        KAI scores that node above every other (its nominatednode plugin): a pod nominated
        by another scheduler, or by a tool, goes there first, as under KAI. kai writes no
        nomination yet (docs/benchmarks.md: nominating pipelined pods without holding
        their room made the rounds after it churn more)."""
        name = pod.nominated_node
        if name is None or name not in self.capacity or not eligible(name):
            return None
        return name if self.capacity[name].fits(pod) else None

    def take(
        self, name: str, pod: Pod, groups: tuple[str, ...] | None = None, alone: bool = False
    ) -> tuple[str, ...]:
        """Place the pod on the node; `groups` replays a known choice of shared devices, and
        a fraction placed `alone` takes the device that leaves the least fragmentation."""
        result: tuple[str, ...] = ()

        if groups is None and pod.gpu.is_fractional:
            cap = self.capacity[name]
            if alone and self._fragmentation is not None and not pod.scalars:
                groups = self._fragmentation.best_devices(cap, pod) or ()
            else:
                groups = tuple(cap.shared_candidates(pod, self._fullest_device_first) or ())

        def apply(cap: NodeCapacity) -> None:
            nonlocal result
            result = cap.take(pod, groups)

        self.update(name, apply)
        return result

    def update(self, name: str, change: Callable[[NodeCapacity], object]) -> None:
        """Change the node's free capacity (a placement, or a leaving pod's room given back),
        keeping the index in step; the enclosing checkpoint's rollback undoes it."""
        if self._saved and name not in self._saved[-1]:
            self._saved[-1][name] = self.capacity[name].copy()
        self._move(name, change)

    # -- internals -----------------------------------------------------------------------
    def _least_fragmenting(
        self, pod: Pod, eligible: Callable[[str], bool], fragmentation: Fragmentation
    ) -> str | None:
        """The node where the pod adds the least expected fragmentation, by score (growths
        that score the same are equal, see `fragmentation`); among equals, the one with
        fewest idle whole devices, as bin-packing prefers, then the one whose free cores per
        free GPU suit the pod best (`cpu_balance`: first, for a pod that asks for more cores
        per GPU than the cluster has), then by name."""
        states = self._tracked_states(fragmentation)
        ranked: list[tuple[int, int, str, int]] = []
        shape = shape_of(pod)
        known = fragmentation.growths(shape)  # read directly: this loop runs per pod per state
        for level, numbers in self._by_level.items():
            if level < pod.gpu.whole:
                continue
            for state in numbers:
                names = states[state]
                growth = known.get(state, _UNKNOWN)
                if growth is _UNKNOWN:
                    cap = self.capacity[names[0]]
                    # Many states cannot hold the pod at all (too few cores or memory):
                    # found out here, the measure is not worked out for them.
                    if not cap.fits_base(pod):
                        continue
                    growth = fragmentation.growth(cap, pod, state, shape)
                if growth is not None:
                    growth = cast(Growth, growth)
                    ranked.append((growth.rank, level, names[0], state))
        ranked.sort()  # a total order (the state breaks ties): the walk's order does not matter
        for _, tied in itertools.groupby(ranked, key=lambda entry: entry[0]):
            found = self._suited_best(pod, list(tied), eligible, states)
            if found is not None:
                return found
        return None

    def _suited_best(
        self,
        pod: Pod,
        tied: list[tuple[int, int, str, int]],
        eligible: Callable[[str], bool],
        states: Mapping[int, list[str]],
    ) -> str | None:
        """The first eligible node among states of equal score, by packing and the cores per
        GPU that suit the pod (see `_least_fragmenting`). A state's first node stands for it,
        as for its growth."""
        balance = self._balance
        if balance is None:
            balance = self._balance = CpuBalance(cap.node for cap in self.capacity.values())
        if balance.asks_for_cores(pod):
            return self._first_eligible(pod, tied, eligible, states, balance, cores_first=True)
        # Packing first: the proportion is worked out only for the states of the fewest idle
        # devices that have an eligible node (`tied` is sorted by level), most pods' first.
        for _, same_level in itertools.groupby(tied, key=lambda entry: entry[1]):
            found = self._first_eligible(pod, list(same_level), eligible, states, balance)
            if found is not None:
                return found
        return None

    def _first_eligible(
        self,
        pod: Pod,
        tied: list[tuple[int, int, str, int]],
        eligible: Callable[[str], bool],
        states: Mapping[int, list[str]],
        balance: CpuBalance,
        cores_first: bool = False,
    ) -> str | None:
        ordered = []
        for _, level, first, state in tied:
            mismatch = balance.mismatch(self.capacity[first], pod)
            ordered.append(((mismatch, level) if cores_first else (level, mismatch), first, state))
        ordered.sort()
        for *_, state in ordered:
            for name in states[state]:
                if eligible(name):
                    return name
        return None

    def _tracked_states(self, fragmentation: Fragmentation) -> dict[int, list[str]]:
        if self._states is None:
            states: dict[int, list[str]] = {}
            for name in sorted(self.capacity):  # by name: each state's list stays sorted
                cap = self.capacity[name]
                state = self._state_of[name] = fragmentation.state_number(cap)
                states.setdefault(state, []).append(name)
                self._by_level.setdefault(max(0, cap.whole_gpus), set()).add(state)
            self._states = states
        return self._states

    def _enter_state(
        self, name: str, fragmentation: Fragmentation, states: dict[int, list[str]]
    ) -> None:
        cap = self.capacity[name]
        state = fragmentation.state_number(cap)
        self._state_of[name] = state
        bisect.insort(states.setdefault(state, []), name)
        self._by_level.setdefault(max(0, cap.whole_gpus), set()).add(state)

    def _leave_state(self, name: str, states: dict[int, list[str]]) -> None:
        state = self._state_of.pop(name)
        names = states[state]
        names.remove(name)
        if not names:  # called before the node changes: its capacity still has the state's level
            del states[state]
            self._by_level[max(0, self.capacity[name].whole_gpus)].discard(state)

    def _sharing_candidates(self, pod: Pod) -> Iterator[str]:
        """Nodes whose shared devices have room win (KAI's gpusharingorder): by the least
        memory a device would have left with the pod on it, then by name."""
        rooms = self._device_rooms()
        streams = [
            _leftovers(devices, pod.gpu.memory_on(memory)) for memory, devices in rooms.items()
        ]
        seen: set[str] = set()
        for _, name in heapq.merge(*streams):
            if name not in seen:  # a node's first device in this order is its tightest
                seen.add(name)
                yield name

    def _device_rooms(self) -> dict[int, list[tuple[int, str]]]:
        if self._rooms is None:
            rooms: dict[int, list[tuple[int, str]]] = {}
            for name, cap in self.capacity.items():
                for free in _free_shared(cap):
                    rooms.setdefault(cap.node.gpu_memory_mib, []).append((free, name))
            for devices in rooms.values():
                devices.sort()
            self._rooms = rooms
        return self._rooms

    def _writable(self, name: str) -> NodeCapacity:
        if name in self._written:
            return self.capacity[name]
        self._written.add(name)
        cap = self.capacity[name] = self.capacity[name].copy()
        return cap

    def _bucket_scan(self, need: int) -> Iterator[str]:
        levels = range(need, self._max_gpus + 1)
        if self._strategy is PlacementStrategy.SPREAD:
            levels = range(self._max_gpus, need - 1, -1)
        for level in levels:
            yield from list(self._buckets[level])

    def _move(self, name: str, change: Callable[[NodeCapacity], object]) -> None:
        cap = self._writable(name)
        old_level = max(0, cap.whole_gpus)
        rooms = self._rooms
        devices = rooms.setdefault(cap.node.gpu_memory_mib, []) if rooms is not None else None
        if devices is not None:
            for free in _free_shared(cap):
                del devices[bisect.bisect_left(devices, (free, name))]
        states, fragmentation = self._states, self._fragmentation
        if states is not None:
            self._leave_state(name, states)
        change(cap)
        if states is not None and fragmentation is not None:
            self._enter_state(name, fragmentation, states)
        new_level = max(0, cap.whole_gpus)
        if new_level != old_level:
            self._buckets[old_level].remove(name)
            bisect.insort(self._buckets[new_level], name)
        if devices is not None:
            for free in _free_shared(cap):
                bisect.insort(devices, (free, name))


_UNKNOWN = object()


def _free_shared(cap: NodeCapacity) -> Iterator[int]:
    """The MiB still free on each of the node's shared devices."""
    memory = cap.node.gpu_memory_mib
    return (memory - used for used in cap.shared.values())


def _leftovers(devices: list[tuple[int, str]], need: int) -> Iterator[tuple[int, str]]:
    """(MiB a device would have left, node) for the devices with room for `need`, in order."""
    for position in range(bisect.bisect_left(devices, (need, "")), len(devices)):
        free, name = devices[position]
        yield free - need, name


def _restore(cap: NodeCapacity, saved: NodeCapacity) -> None:
    cap.cpu, cap.memory, cap.pods = saved.cpu, saved.memory, saved.pods
    cap.whole_gpus, cap.shared, cap.opened = saved.whole_gpus, dict(saved.shared), saved.opened
    cap.scalars = dict(saved.scalars)
