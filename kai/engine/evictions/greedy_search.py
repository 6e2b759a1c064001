"""KAI's victim search, restated: grow the victim set in victim order until the preemptor fits and the rules pass.

Victims are taken one unit at a time: a pod above an elastic gang's minimum, or a
whole gang (kai-semantics §8.6). After each unit that frees room the preemptor could
use, the preemptor is tried on the room the victims leave (and, for consolidation,
the victims on what is left, elsewhere); the first set that seats everything and
passes the action's rules is the answer. It is fast and often over-evicts, which is
why the CP-SAT model exists; it remains the model's warm start, its fallback, and
the benchmark's baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from kai.engine.evictions.budget import SearchBudget
from kai.engine.evictions.decisions import Action
from kai.engine.evictions.gangs import RunningGang
from kai.engine.evictions.options import Verdict, VictimOption
from kai.engine.evictions.preemptors import Preemptor
from kai.engine.evictions.room import Meter, Overlay, Seat, release, seat_all
from kai.engine.evictions.rules import check
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.model import Pod


def greedy_search(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: Sequence[VictimOption],
    budget: SearchBudget,
) -> Scenario | None:
    by_key = {option.gang.key: option for option in options}
    eligible = preemptor_nodes(state, preemptor)
    room = Overlay(state.future)
    slots = _Slots(preemptor.pods, room, eligible)
    budget.spend(len(eligible))
    chosen: dict[str, set[str]] = {}
    most = state.config.evictions.max_consolidation_preemptees
    for option in options:
        if action is Action.CONSOLIDATE and option.gang.key not in chosen and len(chosen) >= most:
            break
        for unit in _units(option):
            gang_pods = chosen.setdefault(option.gang.key, set())
            grew = False
            for pod in unit:
                gang_pods.add(pod.key)
                grew |= slots.release(pod)
            if not grew or not slots.enough():
                continue
            if budget.exhausted:
                return None
            found = _try(state, action, preemptor, by_key, chosen, room, slots.candidates, budget)
            if isinstance(found, Scenario):
                return found
            if found is not None and found.final:
                return None  # the rules refuse this set and every larger one
    return None


class _Slots:
    """How many of the preemptor's pods the room could hold, counted by GPUs, kept as victims leave.

    A seating is tried only when a leaving victim added places and every kind of pod
    has enough of them: a necessary condition that costs nothing to keep up to date,
    unlike a trial. A whole-GPU pod needs that many whole GPUs on one node; a
    fractional pod a whole GPU or a shared device with room; a pod without GPUs a slot.
    """

    def __init__(self, pods: Sequence[Pod], room: Overlay, eligible: set[str]) -> None:
        self._room, self._eligible = room, eligible
        self._needed: dict[int, int] = {}  # whole GPUs per pod (-1: fractional) -> pods
        fractional = [pod for pod in pods if pod.gpu.is_fractional]
        self._smallest_fraction = min(fractional, key=_device_share, default=None)
        for pod in pods:
            kind = -1 if pod.gpu.is_fractional else pod.gpu.whole
            self._needed[kind] = self._needed.get(kind, 0) + 1
        self._places = dict.fromkeys(self._needed, 0)
        self.candidates: set[str] = set()
        for name in eligible:
            self._count(name, +1)

    def release(self, pod: Pod) -> bool:
        """Give the pod's room back; True when that made places for the preemptor's pods."""
        name = pod.node or ""
        before = dict(self._places)
        if name in self._eligible:
            self._count(name, -1)
        release(self._room.writable(name), pod, pod.gpu_groups)
        if name in self._eligible:
            self._count(name, +1)
        return self._places != before

    def enough(self) -> bool:
        return all(self._places[kind] >= n for kind, n in self._needed.items())

    def _count(self, name: str, sign: int) -> None:
        cap = self._room[name]
        if cap.pods <= 0:
            return
        useful = False
        for kind in self._places:
            if kind > 0:
                places = cap.whole_gpus // kind
            elif kind == 0:
                places = cap.pods
            else:
                assert self._smallest_fraction is not None
                memory = cap.node.gpu_memory_mib
                need = self._smallest_fraction.gpu.memory_on(memory)
                places = cap.whole_gpus + sum(
                    1 for used in cap.shared.values() if memory - used >= need
                )
            self._places[kind] += sign * places
            useful |= places > 0
        if useful:
            self.candidates.add(name)


def _try(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: dict[str, VictimOption],
    chosen: dict[str, set[str]],
    room: Overlay,
    candidates: set[str],
    meter: Meter,
) -> Scenario | Verdict | None:
    """The scenario if this set of victims works; the rules' refusal, or None if pods do not fit."""
    trial = Overlay(room)
    config = state.config
    seats = seat_all(
        preemptor.pods,
        trial,
        candidates,
        state.inputs.eligible_for,
        config.placement_strategy,
        meter,
    )
    if seats is None:
        return None
    moves: list[Seat] = []
    if action is Action.CONSOLIDATE:
        leaving = [
            pod for key in chosen for pod in options[key].gang.pods if pod.key in chosen[key]
        ]
        placed = seat_elsewhere(state, leaving, trial, meter)
        if placed is None:
            return None
        moves = placed
    evicted = {key: frozenset(pods) for key, pods in chosen.items() if pods}
    verdict = check(state, action, preemptor, options, evicted)
    if not verdict.ok:
        return verdict
    return Scenario(evicted, tuple(seats), tuple(moves), verdict, "greedy")


def seat_elsewhere(
    state: EvictionState, pods: Sequence[Pod], room: Overlay, meter: Meter | None = None
) -> list[Seat] | None:
    """Consolidation: every moved pod goes to a node other than the one it leaves."""
    eligible_for = state.inputs.eligible_for

    def elsewhere(pod: Pod) -> Callable[[str], bool]:
        allowed = eligible_for(pod)
        return lambda name: name != pod.node and allowed(name)

    return seat_all(pods, room, room.keys(), elsewhere, state.config.placement_strategy, meter)


def preemptor_nodes(state: EvictionState, preemptor: Preemptor) -> set[str]:
    """Nodes any of the preemptor's pods may use."""
    checks = [state.inputs.eligible_for(pod) for pod in preemptor.pods]
    return {name for name in state.future if any(check(name) for check in checks)}


def _device_share(pod: Pod) -> int:
    """Memory one fractional pod takes on a large device: orders fractional pods by size."""
    return pod.gpu.memory_on(_LARGE_DEVICE_MIB)


_LARGE_DEVICE_MIB = 81_920


def _units(option: VictimOption) -> Iterator[tuple[Pod, ...]]:
    """Surplus pods one at a time (last in task order first), then the rest of the gang."""
    gang: RunningGang = option.gang
    taken: set[str] = set()
    if gang.elastic:
        for pod in reversed(gang.pods):
            if gang.allows(taken | {pod.key}) and len(taken) + 1 < len(gang.pods):
                taken.add(pod.key)
                yield (pod,)
    if option.whole_allowed:
        rest = tuple(pod for pod in gang.pods if pod.key not in taken)
        if rest:
            yield rest
