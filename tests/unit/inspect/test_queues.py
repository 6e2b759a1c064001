"""`kai queues` from objects: the tree, spec and status amounts, and what is pending below each queue."""

from __future__ import annotations

from typing import Any

from kai.inspect.queues import QueuesReport, summarise_queues
from tests.unit.inspect.objects import pod, pod_group, queue, resource_list

OVER_LIMIT = "queue team-a: limit 3 GPUs, allocated 1 GPUs, this gang needs 4 GPUs"


def _status(
    allocated: dict[str, str],
    requested: dict[str, str],
    fair_share: dict[str, str],
    deserved: dict[str, str],
    non_preemptible: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "allocated": allocated,
        "allocatedNonPreemptible": non_preemptible or resource_list("0"),
        "requested": requested,
        "fairShare": fair_share,
        "deserved": deserved,
    }


def _report() -> QueuesReport:
    queues = [
        queue(
            "team-a",
            "research",
            gpu=(2, 3),
            status=_status(
                allocated=resource_list("1", "100m", "1073741824"),
                requested=resource_list("3", "300m", "3221225472"),
                fair_share=resource_list("2", "4000m", "32000M"),
                deserved=resource_list("2", "1000m", "100M"),
            ),
        ),
        queue(
            "research",
            gpu=(4, -1),
            status=_status(
                allocated=resource_list("2", "300m", "3000M"),
                requested=resource_list("5", "500m", "5000M"),
                fair_share=resource_list("4", "8000m", "64000M"),
                deserved=resource_list("4", "1000m", "100M"),
                non_preemptible=resource_list("1", "100m", "1000M"),
            ),
        ),
        queue(
            "team-b",
            "research",
            gpu=(2, -1),
            status=_status(
                allocated=resource_list("1"),
                requested=resource_list("1.5"),
                fair_share=resource_list("2"),
                deserved=resource_list("2"),
            ),
        ),
        queue("orphan", "gone"),
        queue("broken", gpu=("lots", -1), status={"allocated": {"cpu": "many"}}),
    ]
    groups = [
        pod_group("a-gang", "team-a", "OverLimit", OVER_LIMIT),
        pod_group("a-done", "team-a"),
        pod_group("b-half", "team-b"),
        pod_group("b-new", "team-b"),
    ]
    pods = [
        pod("a-gang-0", "a-gang", gpus=2),
        pod("a-gang-1", "a-gang", gpus=2),
        pod("a-gang-2", "a-gang", cpu="lots"),  # unreadable, on no node: it waits all the same
        pod("a-done-0", "a-done", node="n1", gpus=1),
        pod("b-half-0", "b-half", node="n1", annotations={"gpu-fraction": "0.5"}),
        pod("b-half-gated", "b-half", schedulingGates=[{"name": "wait"}]),  # gated: not pending
        pod("b-new-0", "b-new", annotations={"gpu-fraction": "0.5"}),
        pod("loose", None),  # no PodGroup yet: in no queue
    ]
    return summarise_queues(queues, groups, pods)


def test_queues_come_in_tree_order_with_their_depth() -> None:
    report = _report()
    assert [(q.name, q.depth, q.parent) for q in report.queues] == [
        ("broken", 0, None),
        ("orphan", 0, "gone"),
        ("research", 0, None),
        ("team-a", 1, "research"),
        ("team-b", 1, "research"),
    ]


def test_spec_and_status_amounts_are_in_engine_units() -> None:
    team_a = next(q for q in _report().document()["queues"] if q["name"] == "team-a")
    assert team_a["quota"] == {"gpu": 2, "cpu": 1000, "memory": 100_000_000}
    assert team_a["limit"] == {"gpu": 3, "cpu": -1, "memory": -1}
    assert team_a["allocated"] == {"gpu": 1, "cpu": 100, "memory": 2**30}
    assert team_a["allocatedNonPreemptible"] == {"gpu": 0, "cpu": 0, "memory": 0}
    assert team_a["requested"] == {"gpu": 3, "cpu": 300, "memory": 3 * 2**30}
    assert team_a["fairShare"] == {"gpu": 2, "cpu": 4000, "memory": 32_000_000_000}
    assert team_a["deserved"] == {"gpu": 2, "cpu": 1000, "memory": 100_000_000}
    team_b = next(q for q in _report().document()["queues"] if q["name"] == "team-b")
    assert team_b["requested"]["gpu"] == 1.5


def test_pending_groups_and_pods_are_summed_up_the_tree() -> None:
    pending = {q.name: q.pending for q in _report().queues}
    assert (pending["team-a"].groups, pending["team-a"].pods) == (1, 3)
    assert dict(pending["team-a"].reasons) == {"OverLimit": 1}
    assert (pending["team-b"].groups, pending["team-b"].pods) == (1, 1)
    assert dict(pending["team-b"].reasons) == {}  # no verdict written yet
    assert (pending["research"].groups, pending["research"].pods) == (2, 4)
    assert dict(pending["research"].reasons) == {"OverLimit": 1}
    assert (pending["orphan"].groups, pending["orphan"].pods) == (0, 0)


def test_the_table_shows_the_tree_and_gpus() -> None:
    assert _report().rows() == [
        (
            "QUEUE",
            "GPU-DESERVED",
            "GPU-FAIRSHARE",
            "GPU-ALLOCATED",
            "GPU-REQUESTED",
            "GPU-LIMIT",
            "PENDING-GROUPS",
            "PENDING-PODS",
        ),
        ("broken", "-", "-", "-", "-", "-", "0", "0"),
        ("orphan", "-", "-", "-", "-", "unlimited", "0", "0"),
        ("research", "4", "4", "2", "5", "unlimited", "2", "4"),
        ("  team-a", "2", "2", "1", "3", "3", "1", "3"),
        ("  team-b", "2", "2", "1", "1.5", "unlimited", "1", "1"),
    ]


def test_wide_adds_quota_non_preemptible_cpu_memory_and_reasons() -> None:
    rows = _report().rows(wide=True)
    assert len(rows[0]) == 2 + 3 * 7 + 3
    assert rows[0][2:9] == (
        "GPU-QUOTA",
        "GPU-DESERVED",
        "GPU-FAIRSHARE",
        "GPU-ALLOCATED",
        "GPU-NONPREEMPTIBLE",
        "GPU-REQUESTED",
        "GPU-LIMIT",
    )
    assert rows[0][9] == "CPU-QUOTA" and rows[0][16] == "MEM-QUOTA"
    assert rows[4] == (
        "  team-a",
        "100",
        *("2", "2", "2", "1", "0", "3", "3"),
        *("1", "1", "4", "100m", "0", "300m", "unlimited"),
        *("100M", "100M", "32G", "1Gi", "0", "3Gi", "unlimited"),
        "1",
        "3",
        "OverLimit=1",
    )


def test_a_malformed_object_is_a_line_naming_it_and_its_field() -> None:
    problems = _report().problems
    assert problems[0] == "Queue orphan: spec.parentQueue: parent queue 'gone' does not exist"
    named = [problem.split(": ")[:2] for problem in problems[1:]]
    assert named == [
        ["Pod ml/a-gang-2", "spec.containers[0].resources.requests.cpu"],
        ["Queue broken", "spec.resources.gpu.quota"],
        ["Queue broken", "status.allocated.cpu"],
    ]
