"""A seating on a kept ranking of the room seats exactly as one that ranks the nodes itself.

The eviction searches try thousands of seatings on overlays of one room; `RankedRoom`
keeps that room's nodes in seating order and is moved along as the room changes. These
tests seat random gangs on random overlays both ways, under both strategies, and after
changes made through the ranking.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from fractions import Fraction

import pytest

from kai.engine.capacity import NodeCapacity, initial_capacity
from kai.engine.evictions.room import Overlay, RankedRoom, Seat, release, seat_all
from kai.engine.model import PlacementStrategy, Pod
from tests.unit.engine.builders import node, pod


def _room(rng: random.Random) -> tuple[dict[str, NodeCapacity], list[Pod]]:
    """Forty 8-GPU nodes, each partly held by whole-GPU pods and halves of shared devices."""
    nodes = [node(f"n{i:02}", gpus=8, gpu_memory_mib=40_000) for i in range(40)]
    running: list[Pod] = []
    for i, each in enumerate(nodes):
        for j in range(rng.randint(0, 9)):
            if rng.random() < 0.2:
                running.append(
                    pod(
                        f"f{i}-{j}",
                        "r",
                        portion=Fraction(1, 2),
                        node_name=each.name,
                        gpu_groups=(f"dev-{i}-{j % 2}",),
                    )
                )
            else:
                running.append(pod(f"w{i}-{j}", "r", gpus=1, node_name=each.name))
    return initial_capacity(nodes, running), running


def _gang(rng: random.Random, size: int) -> list[Pod]:
    pods = []
    for i in range(size):
        if rng.random() < 0.3:
            pods.append(pod(f"p{i}", "g", portion=Fraction(rng.choice((1, 2, 3)), 4)))
        else:
            pods.append(pod(f"p{i}", "g", gpus=rng.choice((1, 1, 2, 4))))
    return pods


def _anywhere(pod: Pod) -> Callable[[str], bool]:
    return lambda name: True


def _seats(seats: list[Seat] | None) -> list[tuple[str, str, tuple[str, ...]]] | None:
    return None if seats is None else [(p.key, n, g) for p, n, g in seats]


@pytest.mark.parametrize("strategy", [PlacementStrategy.BINPACK, PlacementStrategy.SPREAD])
def test_seatings_on_a_kept_ranking_are_those_ranked_afresh(strategy: PlacementStrategy) -> None:
    rng = random.Random(11)
    base, running = _room(rng)
    ranked = RankedRoom(base, strategy is PlacementStrategy.SPREAD)
    compared = 0
    for round_ in range(60):
        if round_ % 10 == 9:  # the owner frees a few pods through the ranking
            for gone in rng.sample(running, 3):
                assert gone.node is not None
                ranked.change(
                    gone.node, functools.partial(release, pod=gone, gpu_groups=gone.gpu_groups)
                )
                running.remove(gone)
        outer = Overlay(base)
        for gone in rng.sample(running, rng.randint(0, 6)):  # a trial's victims leave
            release(outer.writable(gone.node or ""), gone, gone.gpu_groups)
        gang = _gang(rng, rng.randint(1, 6))
        names = rng.sample(sorted(base), rng.randint(10, len(base)))
        fresh = seat_all(gang, Overlay(outer), names, _anywhere, strategy)
        kept = seat_all(gang, Overlay(outer), names, _anywhere, strategy, ranked=ranked)
        assert _seats(kept) == _seats(fresh)
        compared += kept is not None
    assert compared > 10  # most gangs were seated, so the seats themselves were compared


def test_a_ranking_of_another_room_is_not_used() -> None:
    rng = random.Random(3)
    base, _ = _room(rng)
    other, _ = _room(rng)
    gang = [pod("p", "g", gpus=1)]
    names = sorted(base)
    fresh = seat_all(gang, Overlay(base), names, _anywhere, PlacementStrategy.BINPACK)
    kept = seat_all(
        gang,
        Overlay(base),
        names,
        _anywhere,
        PlacementStrategy.BINPACK,
        ranked=RankedRoom(other, False),
    )
    assert _seats(kept) == _seats(fresh)


@pytest.mark.parametrize("strategy", [PlacementStrategy.BINPACK, PlacementStrategy.SPREAD])
def test_a_node_with_exactly_the_ask_idle_is_ranked(strategy: PlacementStrategy) -> None:
    """The edge of the kept order's cut: idle GPUs equal to the smallest whole ask."""
    nodes = [node("a", gpus=4), node("b", gpus=4)]
    held = [pod(f"h{i}", "r", gpus=1, node_name="a") for i in range(2)]
    held += [pod(f"k{i}", "r", gpus=1, node_name="b") for i in range(3)]
    base = initial_capacity(nodes, held)  # a: 2 idle, b: 1 idle
    gang = [pod("p", "g", gpus=2)]
    ranked = RankedRoom(base, strategy is PlacementStrategy.SPREAD)
    seats = seat_all(gang, Overlay(base), ["a", "b"], _anywhere, strategy, ranked=ranked)
    assert _seats(seats) == [("ns/p", "a", ())]
