"""GPU fragmentation as FGD measures it: the free GPU a node holds that the workload cannot use.

Why: bin-packing by free whole GPUs (KAI's binpack) looks at one pod at a time and
ignores what comes next, so it strands capacity: a share put on an idle device of an
8-GPU node, CPU taken from a node whose GPUs then no pod can use, a card left with
less room than any share asks. The FGD paper (Weng et al., USENIX ATC'23) measures
that loss against the workload's own mix of requests: for a kind of pod, a node's
fragment is all its free GPU if that pod cannot run there at all (too little CPU,
memory, pod slots or GPU), else the free part of each device too small for the pod's
per-device ask (a partly used card for a whole-GPU pod, a card with less room than a
share). A node's expected fragmentation weights each kind by how often it occurs.
Placing a pod where that expectation grows least keeps the cluster usable for the pods
that are coming, which is the one thing a placement made now can know about them.

Placements are ranked by a coarse score of the growth, not by the growth itself: FGD
scores a node as a kube-scheduler plugin does, a whole number from the sigmoid of the
fragmentation the placement removes, so placements whose growths differ by a few
hundredths of a device score the same and the tie goes to packing (KAI's order: fewest
idle whole devices). Ranked exactly, such differences (a rare kind of pod that one node
could still host) overrule packing at every pod, and the pods spread: on the openb trace
in the FGD paper's online protocol the exact ranking allocated 0.06-0.61 points fewer of
the GPUs at 100% arrived than the score (0.30 on average, seeds 42-46); FGD as its
simulator codes it, on the same arrivals, gains a point from its own. `SCORE_STEPS` is
coarser than FGD's 100 steps (`MaxNodeScore`), which measured 0.0-0.25 points lower
(seeds 42-44).

The workload's mix is read from the snapshot (the pods that are ours, running or
waiting), so the engine stays pure. Kinds are told apart by their requests and by
where they may go (nodeSelector, required node affinity, tolerations: a `Placement`).
As in FGD, a node a kind may not use strands all its free GPU for that kind: a pod
that may go anywhere then goes first where fewer kinds may, and leaves the nodes of a
GPU model that constrained pods ask for to them. On the openb list `gpuspec33` (a third
of the GPU pods bound to GPU models) the measure blind to placement left a fifth of the
GPUs idle at 100% arrived while constrained pods failed (see README, the trace).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kai.engine.capacity import NodeCapacity
from kai.engine.eligibility import Rejections
from kai.engine.model import GpuRequest, Placement, Pod
from kai.engine.numbering import Numbering

NodeState = tuple[int, int, int, int, bool, int, tuple[int, ...], frozenset[int]]
"""What fragmentation depends on: devices, MiB per device, free cpu, free memory, a pod slot
left, idle whole devices, MiB used on each shared device (sorted), and the placements (by
their number in `_Layouts`) that may not use the node."""


_ANYWHERE = Placement()


@dataclass(frozen=True, slots=True)
class PodKind:
    """One kind of pod in the workload: its requests, and how many pods are of it."""

    cpu: int  # millicores
    memory: int  # bytes
    gpu: GpuRequest
    weight: float
    """Pods of this kind (a count, or a share of some total: only proportions matter)."""
    placement: Placement = _ANYWHERE
    """Where pods of this kind may go."""

    @property
    def uses_gpus(self) -> bool:
        return bool(self.gpu.whole) or self.gpu.is_fractional


def workload_of(pods: Iterable[Pod]) -> tuple[PodKind, ...]:
    """The mix of requests among these pods, each kind weighted by how many are of it."""
    return workload_from_counts(Counter(kind_of(pod) for pod in pods))


def workload_from_counts(counts: Mapping[KindKey, int]) -> tuple[PodKind, ...]:
    """The mix of requests of pods counted by shape and placement (a shape of ints: a
    Fraction key hashes slowly). Kinds come in the order of their shapes; those of one
    shape in the order counted (the measure's sums are whole numbers: order cannot
    change them)."""
    ordered = sorted(counts.items(), key=lambda item: item[0][0])
    return tuple(
        PodKind(cpu, memory, GpuRequest(whole, Fraction(num, den), mib, devices), count, placement)
        for ((cpu, memory, whole, num, den, mib, devices), placement), count in ordered
    )


Shape = tuple[int, int, int, int, int, int, int]
"""A pod's requests: cpu, memory, whole GPUs, gpu-fraction (numerator, denominator: a
Fraction hashes slowly), gpu-memory, shared devices."""


KindKey = tuple[Shape, Placement]
"""What tells kinds of pod apart: their requests, and where they may go."""


def kind_of(pod: Pod) -> KindKey:
    return shape_of(pod), pod.placement


def shape_of(pod: Pod) -> Shape:
    gpu = pod.gpu
    devices = gpu.devices if gpu.is_fractional else 1
    portion = gpu.portion
    return (
        pod.cpu_millis,
        pod.memory_bytes,
        gpu.whole,
        portion.numerator,
        portion.denominator,
        gpu.memory_mib,
        devices,
    )


SCORE_STEPS = 50
"""How many steps the score of a placement has, from the sigmoid of the fragmentation it
removes (FGD's plugin has 100): half a step is about 0.04 devices of growth near zero."""


def score(by: float) -> int:
    """A placement's score from its growth `by` (devices): `SCORE_STEPS` x sigmoid(-by),
    truncated as FGD's plugin does; higher is better, and equal scores tie."""
    return int(SCORE_STEPS / (1.0 + math.exp(min(by, 700.0))))  # exp overflows past 709


@dataclass(frozen=True)
class Growth:
    """What placing a pod of one shape on a node in one state does to its fragmentation."""

    by: float
    level: int | None
    """For a fraction of one device: MiB already used on the device it should join (-1 for
    an idle device); None when the choice does not matter (whole GPUs, several devices)."""
    rank: int = field(init=False)
    """The placement's score negated, so that lower ranks first: growths of equal score tie
    (see the module's docstring), and the ranking breaks the tie by packing."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rank", -score(self.by))


_Part = tuple[int, int, tuple[int, ...]]
"""A state's devices as a GPU ask sees them: MiB per device, idle devices, MiB used on each
shared device."""
_Kind = tuple[int, int, int, int]
"""A kind of pod as the measure weighs it: cpu, memory, its GPU ask's number (-1: none) and
its placement's number (-1: a pod without GPUs, which uses no node's GPUs anyway)."""
_LAYOUT_LIMIT = 200_000
"""States and moves kept from cycle to cycle before the measure starts its caches over."""
_MAX_LAG = 8
"""Weight changes a kept sum may be behind by and still be brought up to date, instead of
computed anew."""
_LOG_LIMIT = 100_000
"""Weight changes logged from measure to measure before one starts its sums over."""
_SumKey = tuple[int, int, bool, _Part, frozenset[int]]
"""What a state's stranded sum depends on: the ranks of its free cpu and memory among the
kinds' requests (0, 0 without a pod slot), whether a pod slot is left, its devices, the
placements that may not use it."""


class _Layouts:
    """What the measure knows whatever the workload's weights, kept from cycle to cycle: the
    number of each node state and each placement, which placements may not use a node, what
    a GPU ask cannot use of a layout of devices, and which states a pod of a shape leaves
    behind when placed on a node in a state."""

    def __init__(self) -> None:
        self.placements = Rejections()
        self.states = Numbering[NodeState]()
        self.asks = Numbering[GpuRequest]()
        self._stranded: dict[tuple[int, _Part], int] = {}
        self.moves: dict[tuple[Shape, int], tuple[tuple[int | None, int], ...]] = {}
        """(level, state after) for each way of placing the pod; () when it does not fit."""
        self.templates: dict[str, tuple[NodeCapacity, int, int]] = {}
        """Node -> a capacity no pass writes (the memo's, see `know`), its state's number,
        and how many placements were numbered then (a new one may close the node)."""

    def state_of(self, cap: NodeCapacity) -> NodeState:
        return (
            cap.node.gpus,
            cap.node.gpu_memory_mib,
            cap.cpu,
            cap.memory,
            cap.pods >= 1,
            cap.whole_gpus,
            tuple(sorted(cap.shared.values())),
            self.placements.of(cap.node),
        )

    def full(self) -> bool:
        return len(self.states) + len(self.moves) > _LAYOUT_LIMIT

    def strands(self, ask: int, part: _Part, free: int) -> int:
        """MiB of free device memory on the node that this GPU ask cannot use."""
        key = (ask, part)
        stranded = self._stranded.get(key)
        if stranded is None:
            stranded = self._stranded[key] = _stranded(self.asks.items[ask], part, free)
        return stranded


def _stranded(gpu: GpuRequest, part: _Part, free: int) -> int:
    device_mib, whole, shared = part
    if gpu.whole:
        return free if whole < gpu.whole else free - whole * device_mib
    need = gpu.memory_on(device_mib)
    shared_free = [device_mib - used for used in shared]
    roomy = whole + sum(1 for room in shared_free if room >= need)
    if roomy < gpu.devices:
        return free
    return sum(room for room in shared_free if room < need)


class Fragmentation:
    """Expected fragmentation of node states against one workload, memoised.

    Units are devices: 2.5 means two and a half devices' worth of free GPU that the
    workload, on average, could not use. A cycle makes one; node states and pod shapes
    repeat across nodes and pods, so most questions are answered from the memos.

    Each state's stranded MiB are summed over the workload's kinds, each weighted (by its
    count, or its share: the measure divides by the total weight). What no weight changes
    (state numbers, what an ask strands of a layout, where a placement leaves a state) is
    kept in `_Layouts`, which `reweighted` hands to the next cycle's measure together with
    the sums it asked for and a log of the counts that changed; a sum is brought up to the
    new counts when it is next asked for (most never are: a cycle asks about the nodes a
    pod could go to). With counts for weights the sums are whole numbers, so an updated
    sum is the sum computed anew. States that differ only in cpu or memory between the
    same two requests of the workload strand the same, and share one sum.
    """

    def __init__(self, workload: Sequence[PodKind], layouts: _Layouts | None = None) -> None:
        self._layouts = layouts or _Layouts()
        self._weights: dict[_Kind, float] = {}
        for kind in workload:
            if kind.weight > 0:
                ask, placement = -1, -1
                if kind.uses_gpus:
                    ask = self._layouts.asks(kind.gpu)
                    placement = self._layouts.placements.number(kind.placement)
                key = (kind.cpu, kind.memory, ask, placement)
                self._weights[key] = self._weights.get(key, 0) + kind.weight
        self._total = sum(self._weights.values())
        self._gpu_less = sum(w for (_c, _m, ask, _p), w in self._weights.items() if ask < 0)
        self._gpu_kinds = self._total - self._gpu_less
        # What a node's free cpu and memory decide is which kinds still fit: only where they
        # stand among the kinds' own requests matters, so states are summed by those ranks.
        self._cpus = tuple(sorted({cpu for cpu, _m, _a, _p in self._weights}))
        self._memories = tuple(sorted({memory for _c, memory, _a, _p in self._weights}))
        by_ask: dict[int, list[tuple[int, int, int, float]]] = {}
        for (cpu, memory, ask, placement), weight in self._weights.items():
            if ask >= 0:
                by_ask.setdefault(ask, []).append((*self._ranks(cpu, memory), placement, weight))
        self._asks = tuple(
            (ask, sum(w for *_, w in hosts), tuple(hosts)) for ask, hosts in sorted(by_ask.items())
        )
        self._keys: dict[int, _SumKey] = {}  # state number -> what its sum depends on
        # (ranks, placements that may not use the node) -> weight per ask that could run there
        self._runnable: dict[tuple[int, int, frozenset[int]], tuple[float, ...]] = {}
        self._log: list[tuple[_Kind, int]] = []  # weight changes since the sums' measure
        self._at = 0  # how much of the log this measure's weights include
        self._sums: dict[_SumKey, tuple[float, int]] = {}
        """Weighted MiB stranded, and how much of the log the sum includes."""
        self._growth: dict[Shape, dict[int, Growth | None]] = {}

    def __bool__(self) -> bool:
        return self._total > 0

    def reweighted(self, workload: Sequence[PodKind]) -> Fragmentation:
        """The measure of the next cycle's workload, knowing what this one learnt: its sums,
        brought up to the new weights when next asked for (most never are again)."""
        layouts = None if self._layouts.full() else self._layouts
        measure = Fragmentation(workload, layouts)
        weights = (*self._weights.values(), *measure._weights.values())
        if (
            layouts is None
            or (measure._cpus, measure._memories) != (self._cpus, self._memories)
            or not all(isinstance(weight, int) for weight in weights)
        ):
            return measure  # other ranks, or float weights: an updated sum could drift
        changed = [
            (key, int(measure._weights.get(key, 0) - self._weights.get(key, 0)))
            for key in sorted(self._weights.keys() | measure._weights.keys())
        ]
        log = self._log
        if len(log) > _LOG_LIMIT:
            return measure
        log.extend((key, by) for key, by in changed if by)
        measure._log, measure._at = log, len(log)
        measure._keys, measure._sums = self._keys, self._sums
        return measure

    def know(self, capacity: Iterable[NodeCapacity]) -> None:
        """Number the states of capacity that no pass will write (a memo's, kept from cycle to
        cycle): `state_number` then answers for these objects without reading them."""
        layouts = self._layouts
        templates, numbered = layouts.templates, len(layouts.placements)
        for cap in capacity:
            known = templates.get(cap.node.name)
            if known is None or known[0] is not cap or known[2] != numbered:
                templates[cap.node.name] = (cap, layouts.states(layouts.state_of(cap)), numbered)

    def state_number(self, cap: NodeCapacity) -> int:
        """The number of this capacity's state (see `number`)."""
        layouts = self._layouts
        known = layouts.templates.get(cap.node.name)
        if known is not None and known[0] is cap and known[2] == len(layouts.placements):
            return known[1]
        return layouts.states(layouts.state_of(cap))

    def of(self, cap: NodeCapacity) -> float:
        return self._of_number(self.state_number(cap))

    def after(self, cap: NodeCapacity, pod: Pod, groups: Sequence[str] | None = None) -> float:
        """The node's expected fragmentation once the pod is placed on it (it must fit)."""
        trial = cap.copy()
        trial.take(pod, groups)
        return self.of(trial)

    def number(self, state: NodeState) -> int:
        """The state's number, the same for equal states for this measure's lifetime."""
        return self._layouts.states(state)

    def growths(self, shape: Shape) -> Mapping[int, Growth | None]:
        """What is known so far of pods of this shape, by state number (read only)."""
        return self._growth.setdefault(shape, {})

    def growth(
        self, cap: NodeCapacity, pod: Pod, number: int | None = None, shape: Shape | None = None
    ) -> Growth | None:
        """How much placing the pod here adds (None: it does not fit); `number` (of the
        node's state) and `shape` (the pod's), when the caller has them."""
        if number is None:
            number = self.state_number(cap)
        shape = shape or shape_of(pod)
        by_state = self._growth.setdefault(shape, {})
        if number in by_state:
            return by_state[number]
        moves = self._moves(cap, pod, number, shape)
        growth: Growth | None = None
        if moves:
            before = self._of_number(number)
            # among equals the fuller device, as KAI's gpupack (level None: no choice)
            after, fuller = min((self._of_number(state), -(level or 0)) for level, state in moves)
            growth = Growth(after - before, None if moves[0][0] is None else -fuller)
        by_state[number] = growth
        return growth

    def best_devices(self, cap: NodeCapacity, pod: Pod) -> tuple[str, ...] | None:
        """Which shared devices a fraction should take here to leave the least fragmentation:
        an existing device with room or an idle one. None when the pod does not fit."""
        growth = self.growth(cap, pod)
        if growth is None:
            return None
        if growth.level is None:
            return tuple(cap.shared_candidates(pod) or ())
        if growth.level < 0:
            return ("",)
        return (min(group for group, used in cap.shared.items() if used == growth.level),)

    def _moves(
        self, cap: NodeCapacity, pod: Pod, number: int, shape: Shape
    ) -> tuple[tuple[int | None, int], ...]:
        key = (shape, number)
        moves = self._layouts.moves.get(key)
        if moves is None:
            moves = self._layouts.moves[key] = self._placements(cap, pod)
        return moves

    def _placements(self, cap: NodeCapacity, pod: Pod) -> tuple[tuple[int | None, int], ...]:
        if not cap.fits(pod):
            return ()
        if not pod.gpu.is_fractional or pod.gpu.devices != 1:
            return ((None, self._after(cap, pod, None)),)
        need = pod.gpu.memory_on(cap.node.gpu_memory_mib)
        options: dict[int, str] = {}
        for group in sorted(cap.shared):
            used = cap.shared[group]
            if used + need <= cap.node.gpu_memory_mib:
                options.setdefault(used, group)
        if cap.whole_gpus >= 1:
            options.setdefault(-1, "")  # open an idle device
        return tuple((used, self._after(cap, pod, (group,))) for used, group in options.items())

    def _after(self, cap: NodeCapacity, pod: Pod, groups: Sequence[str] | None) -> int:
        trial = cap.copy()
        trial.take(pod, groups)
        return self._layouts.states(self._layouts.state_of(trial))

    def _of_number(self, number: int) -> float:
        key = self._keys.get(number)
        if key is None:
            key = self._keys[number] = self._sum_key(self._layouts.states.items[number])
        total = self._sum(key)
        return total / (self._total * key[3][0]) if total else 0.0

    def _ranks(self, cpu: int, memory: int) -> tuple[int, int]:
        """How many of the kinds' distinct cpu and memory requests are at most these."""
        return bisect.bisect_right(self._cpus, cpu), bisect.bisect_right(self._memories, memory)

    def _sum_key(self, state: NodeState) -> _SumKey:
        _devices, device_mib, cpu, memory, slot, whole, shared, closed = state
        ranks = self._ranks(cpu, memory) if slot else (0, 0)
        return (*ranks, slot, (device_mib, whole, shared), closed)

    def _sum(self, key: _SumKey) -> float:
        """The key's stranded MiB under this measure's weights, from the sum kept if any."""
        kept = self._sums.get(key)
        if kept is not None:
            total, at = kept
            if at == self._at:
                return total
            if at < self._at and self._at - at <= _MAX_LAG:
                for kind, by in self._log[at : self._at]:
                    total += by * self._strands(kind, key)
                self._sums[key] = (total, self._at)
                return total
            if at > self._at:  # a later measure moved it on: answer without keeping
                return self._summed(key)
        total = self._summed(key)
        self._sums[key] = (total, self._at)
        return total

    def _summed(self, key: _SumKey) -> float:
        """The key's stranded MiB, weighted, summed over the workload (grouped by GPU ask)."""
        cpu_rank, memory_rank, slot, part, closed = key
        free = _part_free(part)
        if free <= 0:
            return 0
        stranded = self._gpu_less * free  # a pod without GPUs uses none of it
        if not slot:
            return stranded + self._gpu_kinds * free
        runnable = self._runnable.get((cpu_rank, memory_rank, closed))
        if runnable is None:  # kinds that may not use the node strand all of it, as FGD counts
            runnable = self._runnable[(cpu_rank, memory_rank, closed)] = tuple(
                sum(
                    w
                    for c, m, placement, w in hosts
                    if c <= cpu_rank and m <= memory_rank and placement not in closed
                )
                for _ask, _weight, hosts in self._asks
            )
        for (ask, weight, _hosts), run in zip(self._asks, runnable, strict=True):
            stranded += (weight - run) * free
            if run:
                stranded += run * self._layouts.strands(ask, part, free)
        return stranded

    def _strands(self, kind: _Kind, key: _SumKey) -> int:
        """What one pod of a kind cannot use of a key's free device memory, in MiB (the
        kind's requests are among this measure's ranks: `reweighted` checks)."""
        need_cpu, need_memory, ask, placement = kind
        cpu_rank, memory_rank, slot, part, closed = key
        free = _part_free(part)
        if free <= 0:
            return 0
        if ask < 0 or not slot or placement in closed:
            return free
        need_cpu_rank = bisect.bisect_left(self._cpus, need_cpu) + 1
        need_memory_rank = bisect.bisect_left(self._memories, need_memory) + 1
        if need_cpu_rank > cpu_rank or need_memory_rank > memory_rank:
            return free
        return self._layouts.strands(ask, part, free)


def _part_free(part: _Part) -> int:
    """MiB of device memory free on these devices (none when the node has no GPU memory)."""
    device_mib, whole, shared = part
    if device_mib <= 0:
        return 0
    return whole * device_mib + sum(device_mib - used for used in shared)
