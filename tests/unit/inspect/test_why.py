"""`kai why` from objects: the scheduler's verdict beside the group's pods, queue and events."""

from __future__ import annotations

from typing import Any

import pytest

from kai.inspect.why import Target, explain_group, pending_groups, pending_rows, pod_answer
from tests.unit.inspect.objects import pod, pod_group, queue, resource_list

OVER_LIMIT = "queue team-a: limit 3 GPUs, allocated 1 GPUs, this gang needs 4 GPUs"


def _event(about: str, kind: str, when: str, message: str) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind, "name": about, "namespace": "ml"},
        "type": "Warning",
        "reason": "Unschedulable",
        "message": message,
        "lastTimestamp": when,
    }


def _team_a() -> dict[str, Any]:
    status = {
        "allocated": resource_list("1"),
        "allocatedNonPreemptible": resource_list("0"),
        "requested": resource_list("5"),
        "fairShare": resource_list("2"),
        "deserved": resource_list("2"),
    }
    return queue("team-a", "research", gpu=(2, 3), status=status)


def test_a_refused_gang_shows_reason_numbers_pods_queue_and_events() -> None:
    pods = [
        pod("gang-1", "gang", gpus=2),
        pod("gang-0", "gang", gpus=2),
        pod("gang-elsewhere", "gang", gpus=2, namespace="other"),  # another namespace's group
        pod("solo", "solo", node="n1", gpus=1),
    ]
    events = [
        _event("gang", "PodGroup", "2026-01-01T00:00:05Z", f"OverLimit: {OVER_LIMIT}"),
        _event("gang", "PodGroup", "2026-01-01T00:00:01Z", "OverLimit: an older message"),
    ]
    group = pod_group("gang", "team-a", "OverLimit", OVER_LIMIT)
    answer = explain_group("ml/gang", group, pods, events, {"team-a": _team_a()})
    assert answer.header() == [
        "PodGroup:   ml/gang",
        "Queue:      team-a",
        "MinMember:  2",
        "Reason:     OverLimit (since 2026-01-01T00:00:00Z)",
        f"Message:    {OVER_LIMIT}",
        "Queue GPUs: deserved 2, fair share 2, allocated 1, requested 5, limit 3",
    ]
    assert answer.pod_rows() == [
        ("NAME", "PHASE", "NODE", "GPU"),
        ("gang-0", "Pending", "<none>", "2"),
        ("gang-1", "Pending", "<none>", "2"),
    ]
    assert [row[0] for row in answer.event_rows()[1:]] == [
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:05Z",
    ]
    document = answer.document()
    assert (document["reason"], document["message"], document["pendingPods"]) == (
        "OverLimit",
        OVER_LIMIT,
        2,
    )
    assert document["queueGpus"] == {
        "deserved": 2,
        "fairShare": 2,
        "allocated": 1,
        "requested": 5,
        "limit": 3,
    }
    assert document["problems"] == []


def test_a_group_with_no_verdict_yet_or_nothing_waiting_says_so() -> None:
    waiting = explain_group("ml/new", pod_group("new", "team-a"), [pod("new-0", "new")])
    assert waiting.reason is None
    assert waiting.message.startswith("no verdict yet: 1 pod(s) wait")
    running = explain_group("ml/run", pod_group("run", "team-a"), [pod("run-0", "run", node="n1")])
    assert running.message == "nothing waits: 1 pod(s), none pending"


def test_a_missing_group_or_queue_and_a_malformed_pod_are_named() -> None:
    missing = explain_group("ml/gone", None, [pod("p", "gone")])
    assert not missing.exists
    assert missing.message == "PodGroup ml/gone does not exist (yet): its pods wait for it"
    answer = explain_group(
        "ml/g", pod_group("g", "team-z"), [pod("bad", "g", cpu="lots")], queues={}
    )
    assert answer.pod_rows()[1] == ("bad", "Pending", "<none>", "-")
    assert [p.split(": ")[:2] for p in answer.problems] == [
        ["Pod ml/bad", "spec.containers[0].resources.requests.cpu"],
        ["PodGroup ml/g", "spec.queue"],
    ]


def test_a_pod_with_no_group_or_another_scheduler_gets_a_sentence() -> None:
    theirs = pod_answer(pod("web", None, node="n1", schedulerName="default-scheduler"))
    assert theirs is not None
    assert theirs.message == (
        "Pod ml/web is scheduled by default-scheduler, not kai-scheduler: kai does not decide "
        "where it goes (spec.schedulerName); it is on node n1"
    )
    fresh = pod_answer(pod("new", None))
    assert fresh is not None and fresh.message.startswith(
        "Pod ml/new has no PodGroup yet: kai-scheduler's pod grouper has not taken it on"
    )
    assert pod_answer(pod("member", "gang")) is None


def test_targets() -> None:
    assert Target.parse("train-0") == Target("pod", "train-0")
    assert Target.parse("pod/train-0") == Target("pod", "train-0")
    assert Target.parse("podgroup/pg-1") == Target("podgroup", "pg-1")
    assert Target.parse("pg/pg-1") == Target("podgroup", "pg-1")
    for bad in ("deployment/x", "pod/", "pod/a/b"):
        with pytest.raises(ValueError, match="expected POD, pod/NAME or podgroup/NAME"):
            Target.parse(bad)


def test_pending_groups_are_listed_with_their_reasons() -> None:
    groups = [
        pod_group("b", "team-b"),
        pod_group("a", "team-a", "OverLimit", OVER_LIMIT),
        pod_group("done", "team-a"),
    ]
    pods = [pod("a-0", "a"), pod("a-1", "a"), pod("b-0", "b"), pod("done-0", "done", node="n")]
    answers = pending_groups(groups, pods)
    assert pending_rows(answers, all_namespaces=True) == [
        ("NAMESPACE", "PODGROUP", "QUEUE", "PENDING", "REASON", "MESSAGE"),
        ("ml", "a", "team-a", "2", "OverLimit", OVER_LIMIT),
        ("ml", "b", "team-b", "1", "-", answers[1].message),
    ]
    assert answers[1].message.startswith("no verdict yet")
    assert [answer.problems for answer in answers] == [[], []]  # queues were not read
