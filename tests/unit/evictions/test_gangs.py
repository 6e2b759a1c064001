"""Running gangs as victims: whole, or only pods above every minimum; KAI's chunks."""

from __future__ import annotations

from kai.engine.evictions.gangs import running_gangs
from kai.engine.model import SubGroup
from tests.unit.engine.builders import group, pod


def test_a_gang_at_its_minimum_goes_whole_or_not_at_all() -> None:
    g = group("g", "q", min_member=2)
    gang = running_gangs([g], [pod("a", "g", 1, node_name="n"), pod("b", "g", 1, node_name="n")])[
        g.key
    ]
    assert not gang.elastic
    assert not gang.allows({"ns/a"})
    assert gang.allows({"ns/a", "ns/b"})
    assert gang.chunks({"ns/a", "ns/b"}) == [gang.pods]


def test_an_elastic_gang_loses_surplus_pods_one_chunk_each() -> None:
    g = group("g", "q", min_member=1)
    pods = [pod(name, "g", 1, node_name="n") for name in ("a", "b", "c")]
    gang = running_gangs([g], pods)[g.key]
    assert gang.elastic
    assert gang.allows({"ns/b", "ns/c"})
    assert [len(c) for c in gang.chunks({"ns/b", "ns/c"})] == [1, 1]
    # Whole: each surplus pod is a chunk, the core (the first minMember pods) one more.
    chunks = gang.chunks({"ns/a", "ns/b", "ns/c"})
    assert [len(c) for c in chunks] == [1, 1, 1] and chunks[-1] == gang.core


def test_sub_group_minimums_bound_the_surplus() -> None:
    g = group(
        "g",
        "q",
        min_member=2,
        subgroups=(SubGroup("workers", 2), SubGroup("ps", 0)),
    )
    pods = [
        pod("w1", "g", 1, node_name="n", subgroup="workers"),
        pod("w2", "g", 1, node_name="n", subgroup="workers"),
        pod("p1", "g", 1, node_name="n", subgroup="ps"),
        pod("p2", "g", 1, node_name="n", subgroup="ps"),
    ]
    gang = running_gangs([g], pods)[g.key]
    assert gang.allows({"ns/p1", "ns/p2"})  # the workers keep their two
    assert not gang.allows({"ns/w1"})  # the workers would fall below theirs


def test_only_bound_pods_of_ours_run() -> None:
    g = group("g", "q")
    pods = [
        pod("a", "g", 1, node_name="n"),
        pod("b", "g", 1),
        pod("c", "g", 1, node_name="n", ours=False),
    ]
    assert [p.key for p in running_gangs([g], pods)[g.key].pods] == ["ns/a"]
