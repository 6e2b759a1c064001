"""Node predicates: readiness, cordons, nodeSelector, required node affinity and taints."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kai.engine.eligibility import Rejections, node_accepts, rejection_reason
from kai.engine.model import Node, Placement, Requirement, Taint, Toleration
from tests.unit.engine.builders import node

GPU_NODE = node("n1", labels={"pool": "a", "gpus": "8"})


def affinity(*requirements: Requirement) -> Placement:
    return Placement(affinity_terms=(requirements,))


def test_selector_must_match_every_label() -> None:
    assert node_accepts(GPU_NODE, Placement(node_selector=(("pool", "a"),)))
    assert not node_accepts(GPU_NODE, Placement(node_selector=(("pool", "a"), ("zone", "x"))))


def test_affinity_operators() -> None:
    assert node_accepts(GPU_NODE, affinity(Requirement("pool", "In", ("a", "b"))))
    assert not node_accepts(GPU_NODE, affinity(Requirement("pool", "NotIn", ("a",))))
    assert node_accepts(GPU_NODE, affinity(Requirement("zone", "NotIn", ("a",))))
    assert node_accepts(GPU_NODE, affinity(Requirement("pool", "Exists")))
    assert not node_accepts(GPU_NODE, affinity(Requirement("pool", "DoesNotExist")))
    assert node_accepts(GPU_NODE, affinity(Requirement("gpus", "Gt", ("4",))))
    assert not node_accepts(GPU_NODE, affinity(Requirement("gpus", "Lt", ("4",))))
    assert node_accepts(GPU_NODE, affinity(Requirement("metadata.name", "In", ("n1",))))


def test_affinity_terms_are_ored_and_requirements_anded() -> None:
    wrong, right = Requirement("pool", "In", ("b",)), Requirement("pool", "In", ("a",))
    assert node_accepts(GPU_NODE, Placement(affinity_terms=((wrong,), (right,))))
    assert not node_accepts(GPU_NODE, Placement(affinity_terms=((wrong, right),)))


def test_hard_taints_need_a_toleration_and_soft_ones_do_not() -> None:
    tainted = node("t", taints=(Taint("dedicated", "ml", "NoSchedule"),))
    soft = node("s", taints=(Taint("dedicated", "ml", "PreferNoSchedule"),))
    assert not node_accepts(tainted, Placement())
    assert node_accepts(soft, Placement())
    exact = Toleration("dedicated", "Equal", "ml", "NoSchedule")
    other_value = Toleration("dedicated", "Equal", "web", "NoSchedule")
    any_value = Toleration("dedicated", "Exists", None, None)
    everything = Toleration(None, "Exists", None, None)
    wrong_effect = Toleration("dedicated", "Equal", "ml", "NoExecute")
    assert node_accepts(tainted, Placement(tolerations=(exact,)))
    assert not node_accepts(tainted, Placement(tolerations=(other_value,)))
    assert node_accepts(tainted, Placement(tolerations=(any_value,)))
    assert node_accepts(tainted, Placement(tolerations=(everything,)))
    assert not node_accepts(tainted, Placement(tolerations=(wrong_effect,)))
    assert (
        rejection_reason(tainted, Placement()) == "taint dedicated=ml:NoSchedule is not tolerated"
    )


def test_cordoned_and_not_ready_nodes_take_nothing() -> None:
    assert not node_accepts(node("c", unschedulable=True), Placement())
    assert not node_accepts(node("r", ready=False), Placement())
    assert rejection_reason(node("r", ready=False), Placement()) == "node is not Ready"


_NODES = st.builds(
    node,
    st.sampled_from(["n1", "n2", "n3"]),
    labels=st.dictionaries(st.sampled_from(["pool", "gpu"]), st.sampled_from(["a", "b"])),
    taints=st.lists(
        st.builds(
            Taint, st.sampled_from(["dedicated", "gpu"]), st.just("x"), st.just("NoSchedule")
        ),
        max_size=2,
    ).map(tuple),
    ready=st.booleans(),
    unschedulable=st.booleans(),
)
_PLACEMENTS = st.builds(
    Placement,
    node_selector=st.lists(
        st.tuples(st.sampled_from(["pool", "gpu"]), st.sampled_from(["a", "b"])), max_size=1
    ).map(tuple),
    affinity_terms=st.lists(
        st.tuples(st.builds(Requirement, st.sampled_from(["pool", "gpu"]), st.just("Exists"))),
        max_size=1,
    ).map(tuple),
    tolerations=st.lists(
        st.builds(
            Toleration,
            st.sampled_from(["dedicated", "gpu"]),
            st.just("Exists"),
            st.none(),
            st.none(),
        ),
        max_size=2,
    ).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_NODES, _PLACEMENTS, st.integers(0, 5)), max_size=30))
def test_rejections_kept_across_nodes_and_new_placements_agree_with_node_accepts(
    steps: list[Node | Placement | int],
) -> None:
    """Placements are numbered as they come, node objects are asked about again (an int: the
    node of that step back) or replaced under the same names; at every step each node's
    answer is what `node_accepts` says of each placement."""
    rejections = Rejections()
    placements: list[Placement] = []
    asked: list[Node] = []
    for step in steps:
        if isinstance(step, Placement):
            if rejections.number(step) == len(placements):
                placements.append(step)
            continue
        if isinstance(step, int) and not asked:
            continue
        asked_node = asked[-1 - step % len(asked)] if isinstance(step, int) else step
        asked.append(asked_node)
        expected = {n for n, p in enumerate(placements) if not node_accepts(asked_node, p)}
        assert rejections.of(asked_node) == expected
