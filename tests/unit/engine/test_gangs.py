"""Gang requests: which pending pods form the core that must be placed together."""

from __future__ import annotations

from kai.engine.gangs import build_gang_requests
from kai.engine.model import SubGroup
from tests.unit.engine.builders import group, pod


def test_core_reaches_min_member_and_the_rest_is_elastic() -> None:
    pods = [pod(f"p{i}", "g", gpus=1) for i in range(5)]
    (request,) = build_gang_requests([group("g", "q", min_member=3)], {"ns/g": pods})
    assert len(request.core) == 3 and len(request.elastic) == 2


def test_running_pods_count_towards_the_minimum() -> None:
    pods = [
        pod("r1", "g", gpus=1, node_name="n1"),
        pod("r2", "g", gpus=1, node_name="n1"),
        pod("p1", "g", gpus=1),
        pod("p2", "g", gpus=1),
    ]
    (request,) = build_gang_requests([group("g", "q", min_member=3)], {"ns/g": pods})
    assert len(request.core) == 1 and len(request.elastic) == 1 and request.active == 2


def test_each_subgroup_minimum_is_met_first() -> None:
    subgroups = (SubGroup("leader", 1), SubGroup("workers", 2))
    pods = [
        pod("w1", "g", subgroup="workers"),
        pod("w2", "g", subgroup="workers"),
        pod("w3", "g", subgroup="workers"),
        pod("l1", "g", subgroup="leader"),
    ]
    (request,) = build_gang_requests(
        [group("g", "q", min_member=3, subgroups=subgroups)], {"ns/g": pods}
    )
    core = sorted(p.name for p in request.core)
    assert core == ["l1", "w1", "w2"] and [p.name for p in request.elastic] == ["w3"]


def test_too_few_pods_is_reported_as_missing() -> None:
    (request,) = build_gang_requests([group("g", "q", min_member=4)], {"ns/g": [pod("p", "g")]})
    assert request.core == () and request.missing == 3
