"""A group written for pods bound before it existed gets the start the API server recorded.

The times are the pods' PodScheduled transitions, set by hand; the expected start is the
one a gang's own cycle would have stamped: the bind that brought it to its minimum.
"""

from __future__ import annotations

from typing import Any

from kai.api.podgroups import LAST_START_ANNOTATION
from kai.grouping.plan import PodGroupPlan
from kai.operator.recovered_starts import with_recovered_starts


def plan(group: str, min_member: int = 1) -> PodGroupPlan:
    manifest = {
        "metadata": {"name": group, "namespace": "ns", "annotations": {"other": "kept"}},
        "spec": {"minMember": min_member, "queue": "q"},
    }
    return PodGroupPlan(group, "ns", manifest, {"pod-group-name": group}, {})


def pod(node: str | None = "n1", scheduled: str | None = None) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}
        )
    return {"spec": {"nodeName": node} if node else {}, "status": {"conditions": conditions}}


def start_of(found: PodGroupPlan) -> str | None:
    annotations: dict[str, str] = found.manifest["metadata"]["annotations"]
    return annotations.get(LAST_START_ANNOTATION)


def test_a_lone_bound_pod_gives_its_group_the_time_it_was_bound() -> None:
    found = with_recovered_starts(
        {"ns/a": plan("g")}, {"ns/a": pod(scheduled="2026-12-05T03:58:07Z")}
    )
    assert start_of(found["ns/a"]) == "2026-12-05T03:58:07Z"
    assert found["ns/a"].manifest["metadata"]["annotations"]["other"] == "kept"


def test_a_gang_starts_when_the_pod_that_brought_it_to_its_minimum_was_bound() -> None:
    plans = {key: plan("gang", min_member=2) for key in ("ns/a", "ns/b", "ns/c")}
    pods = {
        "ns/a": pod(scheduled="2026-12-05T03:58:09Z"),
        "ns/b": pod(scheduled="2026-12-05T03:58:07Z"),
        "ns/c": pod(scheduled="2026-12-05T03:58:08Z"),
    }
    found = with_recovered_starts(plans, pods)
    assert {start_of(p) for p in found.values()} == {"2026-12-05T03:58:08Z"}


def test_a_gang_bound_below_its_minimum_has_not_started() -> None:
    plans = {key: plan("gang", min_member=3) for key in ("ns/a", "ns/b", "ns/c")}
    pods = {
        "ns/a": pod(scheduled="2026-12-05T03:58:07Z"),
        "ns/b": pod(scheduled="2026-12-05T03:58:08Z"),
        "ns/c": pod(node=None),
    }
    assert all(start_of(p) is None for p in with_recovered_starts(plans, pods).values())


def test_pods_not_bound_or_without_a_readable_bind_time_give_no_start() -> None:
    plans = {"ns/new": plan("a"), "ns/untimed": plan("b"), "ns/odd": plan("c")}
    pods = {
        "ns/new": pod(node=None, scheduled="2026-12-05T03:58:07Z"),
        "ns/untimed": pod(),
        "ns/odd": pod(scheduled="yesterday"),
    }
    found = with_recovered_starts(plans, pods)
    assert found == plans
