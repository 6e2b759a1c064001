"""The gang tree: which pods a PodGroup with sub-groups and minSubGroup must place together."""

from __future__ import annotations

import dataclasses

from kai.engine.evictions.gangs import RunningGang
from kai.engine.evictions.stale import _is_stale
from kai.engine.model import PodGroup, SubGroup
from kai.engine.subgroups import choose, holds, is_satisfied, tree
from kai.engine.validator import ProposedBinding, validate
from tests.unit.engine.builders import group, node, pod, queue, snapshot


def _replicas(min_sub_group: int | None, *subs: SubGroup) -> PodGroup:
    return dataclasses.replace(
        group("g", "q", min_member=0, subgroups=subs), min_sub_group=min_sub_group
    )


def _pods(prefix: str, subgroup: str, n: int, on: str | None = None) -> list:  # type: ignore[type-arg]
    return [pod(f"{prefix}-{i}", "g", gpus=1, subgroup=subgroup, node_name=on) for i in range(n)]


def test_without_sub_groups_the_core_is_min_member_and_the_rest_is_elastic() -> None:
    pending = [pod(f"p-{i}", "g", gpus=1) for i in range(5)]
    choice = choose(group("g", "q", min_member=3), [], pending)
    assert choice is not None
    assert [p.name for p in choice.core] == ["p-0", "p-1", "p-2"]
    assert [p.name for p in choice.elastic] == ["p-3", "p-4"]
    assert not choice.growth


def test_min_sub_group_one_needs_only_the_first_unsatisfied_child() -> None:
    g = _replicas(1, SubGroup("a", 2), SubGroup("b", 2))
    choice = choose(g, [], [*_pods("a", "a", 2), *_pods("b", "b", 2)])
    assert choice is not None
    assert sorted(p.name for p in choice.core) == ["a-0", "a-1"]
    assert choice.elastic == ()  # b below its minimum: no lone pod of it may be placed


def test_unset_min_sub_group_needs_every_child() -> None:
    g = _replicas(None, SubGroup("a", 2), SubGroup("b", 1))
    choice = choose(g, [], [*_pods("a", "a", 3), *_pods("b", "b", 1)])
    assert choice is not None
    assert sorted(p.name for p in choice.core) == ["a-0", "a-1", "b-0"]
    assert [p.name for p in choice.elastic] == ["a-2"]


def test_a_satisfied_gang_grows_by_a_whole_child() -> None:
    g = _replicas(1, SubGroup("a", 2), SubGroup("b", 2))
    choice = choose(g, _pods("a", "a", 2, on="n0"), _pods("b", "b", 2))
    assert choice is not None and choice.growth
    assert sorted(p.name for p in choice.core) == ["b-0", "b-1"]


def test_the_least_satisfied_child_goes_first() -> None:
    g = _replicas(1, SubGroup("a", 4), SubGroup("b", 2))
    # a has 3 of 4 running, b none: b is further from its minimum (0/2 < 3/4).
    choice = choose(g, _pods("a", "a", 3, on="n0"), [*_pods("x", "a", 1), *_pods("b", "b", 2)])
    assert choice is not None
    assert sorted(p.name for p in choice.core) == ["b-0", "b-1"]


def test_too_few_pods_for_any_child_is_not_ready() -> None:
    g = _replicas(2, SubGroup("a", 2), SubGroup("b", 2))
    assert choose(g, [], [*_pods("a", "a", 2), *_pods("b", "b", 1)]) is None


def test_nested_sets_count_children_at_their_minimum() -> None:
    g = _replicas(
        1,
        SubGroup("left", 0, min_sub_group=2),
        SubGroup("l1", 1, parent="left"),
        SubGroup("l2", 1, parent="left"),
        SubGroup("right", 3),
    )
    root = tree(g)
    assert not is_satisfied(root, {"l1": 1})
    assert is_satisfied(root, {"l1": 1, "l2": 1})
    assert is_satisfied(root, {"right": 3})


def test_the_validator_accepts_one_child_of_min_sub_group_and_rejects_half_a_child() -> None:
    g = _replicas(1, SubGroup("a", 2), SubGroup("b", 2))
    pods = [*_pods("a", "a", 2), *_pods("b", "b", 2)]
    snap = snapshot([node("n0", gpus=4)], pods, [g], [queue("q")])
    one_child = [ProposedBinding("ns/a-0", "n0", ()), ProposedBinding("ns/a-1", "n0", ())]
    assert validate(snap, one_child) == []
    half = [*one_child, ProposedBinding("ns/b-0", "n0", ())]
    assert any("sub-group b" in problem for problem in validate(snap, half))
    none_whole = [ProposedBinding("ns/a-0", "n0", ()), ProposedBinding("ns/b-0", "n0", ())]
    assert validate(snap, none_whole) != []


def test_a_gang_running_one_child_of_min_sub_group_one_is_whole_and_not_stale() -> None:
    g = _replicas(1, SubGroup("a", 2), SubGroup("b", 2))
    running = _pods("a", "a", 2, on="n0")
    assert holds(g, running)
    assert not _is_stale(g, [*running, *_pods("b", "b", 2)], set())
    assert not holds(g, running[:1])  # half of child a
    assert _is_stale(g, running[:1], set())


def test_evicting_a_spare_child_keeps_the_gang_and_half_a_child_does_not() -> None:
    g = _replicas(1, SubGroup("a", 2), SubGroup("b", 2))
    pods = (*_pods("a", "a", 2, on="n0"), *_pods("b", "b", 2, on="n0"))
    gang = RunningGang(g, pods)
    assert gang.allows({"ns/b-0", "ns/b-1"})
    assert not gang.allows({"ns/b-0"})
    assert gang.allows({p.key for p in pods})
