"""The node index's order for a GPU fraction under bin-packing, against a scan of every node.

The index keeps shared devices sorted by their free memory and updates them as pods are
taken and checkpoints roll back; a fresh scan of the nodes' capacity must agree with it
after any sequence of those.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.capacity import NodeCapacity, initial_capacity
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
