"""The node index's order for a GPU fraction under bin-packing, against a scan of every node.

The index keeps shared devices sorted by their free memory and updates them as pods are
taken and checkpoints roll back; a fresh scan of the nodes' capacity must agree with it
after any sequence of those.
"""

from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.capacity import NodeCapacity, initial_capacity
from kai.engine.evictions.room import release
from kai.engine.fragmentation import Fragmentation, workload_of
from kai.engine.model import PlacementStrategy, Pod
from kai.engine.node_index import NodeIndex
from tests.unit.engine.builders import node, pod

_DEVICE_SIZES = (40_000, 80_000)
_PORTIONS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))


def _scanned_choice(capacity: dict[str, NodeCapacity], fraction: Pod) -> str | None:
    """The node KAI's gpusharingorder picks: the shared device that would have the least
    memory left, then the node's name; if no shared device has room, the fullest node with
    a free whole GPU, then by name."""
    tightest: list[tuple[int, str]] = []
    for name, cap in capacity.items():
        need = fraction.gpu.memory_on(cap.node.gpu_memory_mib)
        left = [cap.node.gpu_memory_mib - used - need for used in cap.shared.values()]
        if any(room >= 0 for room in left) and cap.fits(fraction):
            tightest.append((min(room for room in left if room >= 0), name))
    if tightest:
        return min(tightest)[1]
    whole = [(cap.whole_gpus, name) for name, cap in capacity.items() if cap.fits(fraction)]
    return min(whole)[1] if whole else None


_steps = st.lists(
    st.tuples(st.sampled_from(_PORTIONS), st.sampled_from(("commit", "rollback"))),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from(_DEVICE_SIZES), min_size=1, max_size=6),
    running=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(_PORTIONS)), max_size=12),
    steps=_steps,
)
def test_a_fraction_goes_where_a_scan_of_every_node_says(
    sizes: list[int],
    running: list[tuple[int, Fraction]],
    steps: list[tuple[Fraction, str]],
) -> None:
    nodes = [node(f"n{i}", gpus=2, gpu_memory_mib=size) for i, size in enumerate(sizes)]
    pods = [
        pod(f"r{i}", "running", portion=portion, node_name=f"n{at % len(nodes)}")
        for i, (at, portion) in enumerate(running)
    ]
    capacity = initial_capacity(nodes, pods)
    index = NodeIndex(capacity, PlacementStrategy.BINPACK)
    for i, (portion, outcome) in enumerate(steps):
        fraction = pod(f"p{i}", "pending", portion=portion)
        chosen = index.find(fraction, lambda _: True)
        assert chosen == _scanned_choice(index.capacity, fraction)
        if chosen is None:
            continue
        index.begin()
        index.take(chosen, fraction)
        getattr(index, outcome)()


_PROBES = (
    pod("probe-1", "probe", gpus=1),
    pod("probe-2", "probe", gpus=2),
    pod("probe-half", "probe", portion=Fraction(1, 2)),
    pod("probe-quarter", "probe", portion=Fraction(1, 4)),
)
_changes = st.lists(
    st.tuples(
        st.sampled_from(("take", "release", "begin", "commit", "rollback")),
        st.integers(0, 3),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    running=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from((1, 2, *_PORTIONS))), max_size=10
    ),
    changes=_changes,
)
def test_an_index_changed_and_rolled_back_finds_what_a_fresh_one_finds(
    running: list[tuple[int, int | Fraction]],
    changes: list[tuple[str, int, bool]],
) -> None:
    """The eviction actions keep one index across their next-cycle checks: each gives
    victims' room back (`update`) and places gangs inside a checkpoint, then rolls back.
    Whatever the sequence, the index must choose as one built afresh from its capacity."""
    nodes = [node(f"n{i}", gpus=4, gpu_memory_mib=_DEVICE_SIZES[i % 2]) for i in range(4)]
    pods = [
        pod(
            f"r{i}",
            "running",
            gpus=ask if isinstance(ask, int) else 0,
            portion=ask if isinstance(ask, Fraction) else Fraction(0),
            node_name=f"n{at}",
        )
        for i, (at, ask) in enumerate(running)
    ]
    capacity = initial_capacity(nodes, pods)
    pods = [  # the devices each running fraction was given, so that it can be released
        dataclasses.replace(p, gpu_groups=tuple(capacity[p.node or ""].shared)[:1])
        if p.gpu.is_fractional
        else p
        for p in pods
    ]
    original = {name: cap.copy() for name, cap in capacity.items()}
    workload = workload_of([pod("w", "w", portion=Fraction(1, 2)), pod("v", "v", gpus=1)])
    measure = Fragmentation(workload)
    index = NodeIndex(capacity, PlacementStrategy.BINPACK, fragmentation=measure)
    index.begin()  # the look ahead's own checkpoint, rolled back at the end
    present = [set(range(len(pods)))]  # running pods not released, per open checkpoint
    for step, (kind, which, alone) in enumerate(changes):
        if kind == "take":
            probe = dataclasses.replace(_PROBES[which], name=f"p{step}")
            chosen = index.find(probe, lambda _: True, alone)
            if chosen is not None:
                index.take(chosen, probe, alone=alone)
        elif kind == "release" and present[-1] & {which}:
            present[-1].discard(which)
            leaving = pods[which]
            index.update(
                leaving.node or "",
                functools.partial(release, pod=leaving, gpu_groups=leaving.gpu_groups),
            )
        elif kind == "begin":
            index.begin()
            present.append(set(present[-1]))
        elif kind in ("commit", "rollback") and len(present) > 1:
            getattr(index, kind)()
            undone = present.pop()
            if kind == "commit":
                present[-1] = undone
        fresh = NodeIndex(
            {name: cap.copy() for name, cap in index.capacity.items()},
            PlacementStrategy.BINPACK,
            fragmentation=measure,
        )
        for probe in _PROBES:
            for placed_alone in (False, True):
                assert index.find(probe, lambda _: True, placed_alone) == fresh.find(
                    probe, lambda _: True, placed_alone
                )
    while present:
        index.rollback()
        present.pop()
    assert index.capacity == original
    assert capacity == original  # the caller's objects were copied before any change
