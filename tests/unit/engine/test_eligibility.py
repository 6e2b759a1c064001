"""Node predicates: readiness, cordons, nodeSelector, required node affinity and taints."""

from __future__ import annotations

from kai.engine.eligibility import node_accepts, rejection_reason
from kai.engine.model import Placement, Requirement, Taint, Toleration
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
