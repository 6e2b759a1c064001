"""KAI's victim search, restated: grow the victim set in victim order until the preemptor fits and the rules pass.

Victims are taken one unit at a time: a pod above an elastic gang's minimum, or a
whole gang (kai-semantics §8.6). After each unit the preemptor is tried on the room
the victims leave (and, for consolidation, the victims on what is left, elsewhere);
the first set that seats everything and passes the action's rules is the answer.
It is fast and often over-evicts, which is why the CP-SAT model exists; it remains
the model's warm start, its fallback, and the benchmark's baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from kai.engine.evictions.decisions import Action
from kai.engine.evictions.gangs import RunningGang
from kai.engine.evictions.room import Overlay, Seat, release, seat_all
from kai.engine.evictions.rules import Preemptor, VictimOption, check
from kai.engine.evictions.scenario import Scenario
from kai.engine.evictions.state import EvictionState
from kai.engine.model import Pod


def greedy_search(
    state: EvictionState, action: Action, preemptor: Preemptor, options: Sequence[VictimOption]
) -> Scenario | None:
    by_key = {option.gang.key: option for option in options}
    eligible = preemptor_nodes(state, preemptor)
    room = Overlay(state.future)
    need = sum(pod.gpu.whole for pod in preemptor.pods)
    free = sum(max(0, room[name].whole_gpus) for name in eligible)
    candidates = {name for name in eligible if _has_room(room, name)}
    chosen: dict[str, set[str]] = {}
    most = state.config.evictions.max_consolidation_preemptees
    for option in options:
        if action is Action.CONSOLIDATE and option.gang.key not in chosen and len(chosen) >= most:
            break
        for unit in _units(option):
            gang_pods = chosen.setdefault(option.gang.key, set())
            for pod in unit:
                gang_pods.add(pod.key)
                assert pod.node is not None
                cap = room.writable(pod.node)
                before = cap.whole_gpus
                release(cap, pod, pod.gpu_groups)
                if pod.node in eligible:
                    free += cap.whole_gpus - before
                    candidates.add(pod.node)
            if free < need:
                continue
            scenario = _try(state, action, preemptor, by_key, chosen, room, candidates)
            if scenario is not None:
                return scenario
    return None


def _try(
    state: EvictionState,
    action: Action,
    preemptor: Preemptor,
    options: dict[str, VictimOption],
    chosen: dict[str, set[str]],
    room: Overlay,
    candidates: set[str],
) -> Scenario | None:
    trial = Overlay(room)
    seats = seat_all(
        preemptor.pods,
        trial,
        candidates,
        state.inputs.eligible_for,
        state.config.placement_strategy,
    )
    if seats is None:
        return None
    moves: list[Seat] = []
    if action is Action.CONSOLIDATE:
        leaving = [
            pod for key in chosen for pod in options[key].gang.pods if pod.key in chosen[key]
        ]
        placed = seat_elsewhere(state, leaving, trial)
        if placed is None:
            return None
        moves = placed
    evicted = {key: frozenset(pods) for key, pods in chosen.items() if pods}
    verdict = check(state, action, preemptor, options, evicted)
    if not verdict.ok:
        return None
    return Scenario(evicted, tuple(seats), tuple(moves), verdict, "greedy")


def seat_elsewhere(state: EvictionState, pods: Sequence[Pod], room: Overlay) -> list[Seat] | None:
    """Consolidation: every moved pod goes to a node other than the one it leaves."""
    eligible_for = state.inputs.eligible_for

    def elsewhere(pod: Pod) -> Callable[[str], bool]:
        allowed = eligible_for(pod)
        return lambda name: name != pod.node and allowed(name)

    return seat_all(pods, room, room.keys(), elsewhere, state.config.placement_strategy)


def preemptor_nodes(state: EvictionState, preemptor: Preemptor) -> set[str]:
    """Nodes any of the preemptor's pods may use."""
    checks = [state.inputs.eligible_for(pod) for pod in preemptor.pods]
    return {name for name in state.future if any(check(name) for check in checks)}


def _has_room(room: Overlay, name: str) -> bool:
    cap = room[name]
    return cap.pods > 0 and (cap.whole_gpus > 0 or bool(cap.shared) or cap.cpu > 0)


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
