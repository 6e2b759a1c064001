"""Reclaim against a limit: an ancestor's limit is lifted by victims beneath it, never by others.

KAI's reclaim eligibility reads fair share alone (kai-semantics §8.3); the limits are
held in its simulation, with the victims gone. So a gang refused by its department's
limit may reclaim from a sibling project of the same department, as KAI's case
"Elastic job reclaims single task from another elastic job - equal queues" expects.
Its own queue's limit, or a department that the victims are not in, no eviction lifts.
"""

from __future__ import annotations

from kai.engine.budget import OVER_LIMIT
from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.model import EngineConfig, Pod, PodGroup
from tests.unit.engine.builders import group, node, pod, queue, snapshot
from tests.unit.evictions.clusters import running

CONFIG = EngineConfig(time_limit_seconds=0)


def _cycle(holders: dict[str, tuple[int, bool]], a_limit: int = -1) -> CycleResult:
    """A 12-GPU node. dept-1 (limit 4) has projects a and a2; dept-2 has b; each project's
    quota is 2 GPUs. Each holder queue runs `count` 1-GPU gangs, preemptible or not; a waits for a
    gang of two 1-GPU pods.
    """
    groups: list[PodGroup] = [group("claim", "a", min_member=2)]
    pods: list[Pod] = [pod(f"claim-{i}", "claim", 1, cpu=0, memory=0) for i in range(2)]
    for holder, (count, preemptible) in holders.items():
        for i in range(count):
            g, p = running(f"{holder}-{i}", holder, 1, "n0", preemptible=preemptible)
            groups.append(g)
            pods.append(p)
    queues = [
        queue("dept-1", gpu_quota=4, gpu_limit=4),
        queue("dept-2", gpu_quota=4),
        queue("a", "dept-1", gpu_quota=2, gpu_limit=a_limit),
        queue("a2", "dept-1", gpu_quota=2),
        queue("b", "dept-2", gpu_quota=2),
    ]
    return run_cycle(snapshot([node("n0", gpus=12)], pods, groups, queues), CONFIG)


def test_a_department_limit_is_lifted_by_reclaiming_from_a_sibling_project() -> None:
    result = _cycle({"a2": (4, True)})
    assert result.bindings == ()  # the limit counts a2's pods until they have left
    assert len(result.evictions) == 2
    assert {e.group for e in result.evictions} <= {f"ns/a2-{i}" for i in range(4)}
    assert {p.pod for p in result.pipelined} == {"ns/claim-0", "ns/claim-1"}
    assert result.groups["ns/claim"].message == (
        "2 pods pipelined: 2 pods evicted by reclaim are still leaving; "
        "the gang binds as a whole once they have left"
    )


def test_a_limit_of_the_reclaimers_own_queue_stops_reclaim() -> None:
    result = _cycle({"a2": (4, True)}, a_limit=1)
    assert result.evictions == () and result.pipelined == ()
    assert result.groups["ns/claim"].reason == OVER_LIMIT


def test_victims_outside_the_limited_department_do_not_lift_its_limit() -> None:
    # a2 fills dept-1's limit with work no reclaim may take; b, in dept-2, holds four times
    # its quota, but taking from it leaves dept-1 as full as before.
    result = _cycle({"a2": (4, False), "b": (8, True)})
    assert result.evictions == () and result.pipelined == ()
    assert result.groups["ns/claim"].reason == OVER_LIMIT
