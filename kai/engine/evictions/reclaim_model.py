"""KAI's reclaim rules as linear constraints of the victim model (kai-semantics §10.7).

Per victim side of the queue tree, some chosen chunk must be one that can be taken
last while the side is still above what the reclaimer may hold it to (its fair
share, or while the reclaimer fits its deserved quota, its deserved quota): KAI
checks chunk by chunk against a falling remainder, so the last chunk decides. At
every level of the reclaimer's path, a sibling it takes from must end at least as
saturated as the reclaimer, which is what stops reclaim ping-pong. Auxiliary
variables say how they follow from the evictions, so the warm start covers them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from kai.engine.evictions.cp_terms import (
    Derivation,
    Value,
    any_of,
    distinct,
    exceeds,
    scaled,
)
from kai.engine.evictions.reclaim_rules import leveled, side_threshold
from kai.engine.resources import NO_RESOURCES, ResourceName, Resources

if TYPE_CHECKING:
    from kai.engine.evictions.victim_model import VictimModel


def add_reclaim_rules(built: VictimModel) -> None:
    """KAI's per-chunk rules for each victim side, and the sibling-saturation check."""
    state, preemptor = built.state, built.preemptor
    sides: dict[str, list[str]] = defaultdict(list)  # victim side -> gangs under it
    reclaimer_side: dict[str, str] = {}
    for key in sorted(built.options):
        if not any(pod.key in built.evict for pod in built.options[key].gang.pods):
            continue
        mine, theirs = leveled(state, preemptor.queue, built.options[key].gang.queue)
        sides[theirs].append(key)
        reclaimer_side[theirs] = mine
    for side, gangs in sorted(sides.items()):
        _add_side_rule(built, side, reclaimer_side[side], gangs)
    _add_saturation_rules(built)


def _add_side_rule(built: VictimModel, side: str, reclaimer_side: str, gangs: list[str]) -> None:
    """Some chosen chunk can be taken last while the side is still above its threshold."""
    model, state = built.model, built.state
    threshold = side_threshold(state, built.preemptor, reclaimer_side, side)
    held = state.ledger.allocated.get(side, NO_RESOURCES)
    chunks: list[tuple[cp_model.IntVar, Resources]] = []
    literals: list[cp_model.IntVar] = []
    for key in gangs:
        gang = built.options[key].gang
        if key in built.whole:
            core = gang.core if gang.elastic else gang.pods
            chunks.append((built.whole[key], built.usage_of(core)))
        if gang.elastic:
            chunks += [(built.evict[pod.key], built.usage_of((pod,))) for pod in gang.pods]
        literals += [built.evict[pod.key] for pod in gang.pods]
    last = [model.new_bool_var(f"last[{side},{i}]") for i in range(len(chunks))]
    for flag, (chosen, _) in zip(last, chunks, strict=True):
        model.add(flag <= chosen)
    gives = model.new_bool_var(f"gives[{side}]")  # something is taken from this side
    chosen_any = distinct(literals)
    for literal in chosen_any:
        model.add(literal <= gives)
    model.add(sum(last) == gives)
    built.derived.append((gives, any_of(chosen_any)))
    pods = [pod for key in gangs for pod in built.options[key].gang.pods]
    names = sorted(threshold)
    held_units = {n: scaled(n, held.get(n), False) for n in names}
    need = {n: scaled(n, threshold[n], True) + 1 for n in names}
    taken_terms = {
        n: [
            (built.pod_units(pod.key, n, True), built.evict[pod.key])
            for pod in pods
            if state.usage[pod.key].get(n)
        ]
        for n in names
    }
    kept = [{n: scaled(n, amount.get(n), False) for n in names} for _, amount in chunks]

    remembered: dict[int, int | None] = {}  # per solution evaluated: its chosen last chunk

    def chosen_last(value: Value) -> int | None:
        if id(value) not in remembered:
            taken = {n: sum(c * value(v) for c, v in taken_terms[n]) for n in names}
            remembered[id(value)] = next(
                (
                    i
                    for i, (chosen, _) in enumerate(chunks)
                    if value(chosen)
                    and any(held_units[n] - taken[n] + kept[i][n] >= need[n] for n in names)
                ),
                None,
            )
        return remembered[id(value)]

    def left_with(value: Value, index: int, name: ResourceName) -> int:
        taken = sum(c * value(v) for c, v in taken_terms[name])
        return held_units[name] - taken + kept[index][name]

    def is_last(index: int) -> Derivation:
        return lambda value: int(chosen_last(value) == index)

    for index, flag in enumerate(last):
        built.derived.append((flag, is_last(index)))
    above: list[cp_model.IntVar] = []
    for name in names:
        flag = model.new_bool_var(f"above[{side},{name}]")
        kept_last = sum(
            kept[i][name] * flag_last for i, flag_last in enumerate(last) if kept[i][name]
        )
        taken = sum(c * v for c, v in taken_terms[name])
        model.add(held_units[name] - taken + kept_last >= need[name]).only_enforce_if(flag)
        above.append(flag)

        def is_above(value: Value, name: ResourceName = name) -> int:
            index = chosen_last(value)
            return int(index is not None and left_with(value, index, name) >= need[name])

        built.derived.append((flag, is_above))
    model.add(sum(above) >= gives)


def _add_saturation_rules(built: VictimModel) -> None:
    """At each level of the reclaimer's path, no touched sibling may end up less saturated."""
    model, state, preemptor = built.model, built.state, built.preemptor
    shares, queues = state.inputs.shares, state.inputs.queues
    multiplier = state.config.evictions.reclaimer_saturation_multiplier
    under = built.under
    asked = {name for name, value in preemptor.request.items() if value > 0}
    for level in state.ledger.ancestry(preemptor.queue):
        fair = shares[level.name].fair_share
        held = state.ledger.allocated.get(level.name, NO_RESOURCES) + preemptor.request
        for sibling in sorted(under):
            if sibling == level.name or queues[sibling].parent != level.parent:
                continue
            touched = model.new_bool_var(f"touched[{level.name},{sibling}]")
            for pod_key in under[sibling]:
                model.add(touched >= built.evict[pod_key])
            built.derived.append((touched, any_of([built.evict[k] for k in under[sibling]])))
            involved = set(asked)
            for pod_key in under[sibling]:
                involved |= {n for n, v in state.usage[pod_key].items() if v > 0}
            sibling_fair = shares[sibling].fair_share
            sibling_held = state.ledger.allocated.get(sibling, NO_RESOURCES)
            for name in sorted(involved):
                if sibling_fair.get(name) <= 0:
                    continue
                mine_terms = built.freed_terms(level.name, name, up=False)
                mine_held = scaled(name, held.get(name), False)
                mine = mine_held - sum(c * v for c, v in mine_terms)
                theirs = scaled(name, sibling_held.get(name), False) - built.freed_under(
                    sibling, name, up=True
                )
                fair_mine = scaled(name, fair.get(name), False)
                fair_theirs = scaled(name, sibling_fair.get(name), False)
                if fair_mine <= 0:  # any holding is infinitely saturated
                    model.add(mine <= 0).only_enforce_if(touched)
                    continue
                over = model.new_bool_var(f"over[{level.name},{sibling},{name}]")
                model.add(mine <= fair_mine).only_enforce_if(over.Not())
                built.derived.append((over, exceeds(mine_held, mine_terms, fair_mine)))
                # mine/fair_mine * multiplier < theirs/fair_theirs, cross-multiplied.
                model.add(
                    mine * multiplier.numerator * fair_theirs
                    <= theirs * fair_mine * multiplier.denominator - 1
                ).only_enforce_if([over, touched])
