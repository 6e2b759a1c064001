"""`kai why`: why a pod or PodGroup waits, in the scheduler's own words and numbers.

Every pending PodGroup carries the engine's verdict in its status: an
`UnschedulableOnNodePool` scheduling condition with a reason code (`OverLimit`,
`Unschedulable`, `NotEnoughPods`, ...) and a message naming the queue, the resource
and the amounts (kai.engine.explain, written by kai.operator.status), and the same
text in `Unschedulable` events. This module puts that beside what it is about: the
group's pods and where they are, and how the group's queue stands (its GPU amounts,
read as `kai queues` reads them). A pod with no group yet, or one another scheduler
places, gets a sentence saying so instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kai.api.constants import SCHEDULER_NAME, default_priority_classes
from kai.api.podgroups import parse_pod_group
from kai.engine.model import PodPhase
from kai.engine.resources import Resources
from kai.inspect import units
from kai.inspect.lenient import field as field_at
from kai.inspect.lenient import group_name_of, key_of, namespace_of, parsed, read_pod, text
from kai.inspect.queues import TABLE_MEASURES, queue_amounts, scheduling_reason

MAX_EVENTS = 10
_LABELS = {
    "deserved": "deserved",
    "fairShare": "fair share",
    "allocated": "allocated",
    "requested": "requested",
    "limit": "limit",
}


@dataclass(frozen=True)
class Target:
    """What `kai why` was asked about: a pod, or a PodGroup (`podgroup/NAME`)."""

    kind: str  # "pod" or "podgroup"
    name: str

    @classmethod
    def parse(cls, value: str) -> Target:
        """`NAME` or `pod/NAME` (a pod), `podgroup/NAME` or `pg/NAME`; ValueError otherwise."""
        kind, slash, name = value.partition("/")
        if not slash:
            kind, name = "pod", value
        kind = _KIND_NAMES.get(kind.lower(), "")
        if not kind or not name or "/" in name:
            raise ValueError(f"expected POD, pod/NAME or podgroup/NAME, got {value!r}")
        return cls(kind, name)


_KIND_NAMES = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "podgroup": "podgroup",
    "podgroups": "podgroup",
    "pg": "podgroup",
}


@dataclass(frozen=True)
class PodLine:
    name: str
    phase: str
    node: str | None
    gpu: str
    waiting: bool


@dataclass(frozen=True)
class EventLine:
    when: str
    type: str
    reason: str
    about: str
    message: str


@dataclass(frozen=True)
class GroupAnswer:
    """Why one PodGroup waits (or that it does not)."""

    group: str
    exists: bool
    message: str
    queue: str | None = None
    min_member: int | None = None
    reason: str | None = None
    since: str | None = None
    queue_amounts: Mapping[str, Resources | None] | None = None
    pods: Sequence[PodLine] = ()
    events: Sequence[EventLine] = ()
    problems: Sequence[str] = ()
    pod: str | None = None
    """The pod `kai why` was asked about, when it was asked about a pod."""

    @property
    def waiting(self) -> int:
        return sum(1 for pod in self.pods if pod.waiting)

    def document(self) -> dict[str, Any]:
        amounts = self.queue_amounts
        return {
            **({"pod": self.pod} if self.pod else {}),
            "podGroup": self.group,
            "exists": self.exists,
            "queue": self.queue,
            "minMember": self.min_member,
            "pendingPods": self.waiting,
            "reason": self.reason,
            "message": self.message,
            "since": self.since,
            "queueGpus": None
            if amounts is None
            else {m: _gpu_number(amounts.get(m)) for m in TABLE_MEASURES},
            "pods": [
                {"name": p.name, "phase": p.phase, "node": p.node, "gpu": p.gpu} for p in self.pods
            ],
            "events": [
                {
                    "lastSeen": e.when or None,
                    "type": e.type,
                    "reason": e.reason,
                    "object": e.about,
                    "message": e.message,
                }
                for e in self.events
            ],
            "problems": list(self.problems),
        }

    def header(self) -> list[str]:
        """The verdict in a few lines: group, queue, reason and message, the queue's GPUs."""
        out = [f"Pod:        {self.pod}"] if self.pod else []
        out.append(f"PodGroup:   {self.group}")
        if self.queue:
            out.append(f"Queue:      {self.queue}")
        if self.min_member is not None:
            out.append(f"MinMember:  {self.min_member}")
        if self.reason:
            since = f" (since {self.since})" if self.since else ""
            out.append(f"Reason:     {self.reason}{since}")
        out.append(f"Message:    {self.message}")
        if self.queue_amounts is not None:
            parts = [
                f"{_LABELS[m]} {units.resource_amount('gpu', self.queue_amounts.get(m))}"
                for m in TABLE_MEASURES
            ]
            out.append("Queue GPUs: " + ", ".join(parts))
        return out

    def pod_rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = [("NAME", "PHASE", "NODE", "GPU")]
        return rows + [(p.name, p.phase, p.node or "<none>", p.gpu) for p in self.pods]

    def event_rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = [("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")]
        return rows + [
            (e.when or units.NOT_KNOWN, e.type, e.reason, e.about, e.message) for e in self.events
        ]


@dataclass(frozen=True)
class PodAnswer:
    """The answer for a pod that is in no PodGroup of kai's: one sentence."""

    pod: str
    message: str

    def document(self) -> dict[str, Any]:
        return {"pod": self.pod, "podGroup": None, "message": self.message}

    def header(self) -> list[str]:
        return [f"Pod:        {self.pod}", f"Message:    {self.message}"]


def pod_answer(pod: Mapping[str, Any]) -> PodAnswer | None:
    """The whole answer for a pod kai does not schedule as part of a group, or None."""
    found = _pod_sentence(pod)
    return PodAnswer(key_of("Pod", pod, namespaced=True), found) if found else None


def _pod_sentence(pod: Mapping[str, Any]) -> str | None:
    key = key_of("Pod", pod, namespaced=True)
    scheduler = text(pod, "spec", "schedulerName") or "default-scheduler"
    node = text(pod, "spec", "nodeName")
    if scheduler != SCHEDULER_NAME:
        where = f"; it is on node {node}" if node else ""
        return (
            f"Pod {key} is scheduled by {scheduler}, not {SCHEDULER_NAME}: kai does not decide "
            f"where it goes (spec.schedulerName){where}"
        )
    if group_name_of(pod) is None:
        if node:
            return f"Pod {key} is on node {node} and has no PodGroup"
        return (
            f"Pod {key} has no PodGroup yet: {SCHEDULER_NAME}'s pod grouper has not taken it "
            "on, so it is in no queue and no verdict is written for it; if this lasts, check "
            f"that {SCHEDULER_NAME} runs and look for PodGroupingFailed events on the pod"
        )
    return None


def explain_group(
    group_key: str,
    group: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]] = (),
    queues: Mapping[str, Mapping[str, Any]] | None = None,
) -> GroupAnswer:
    """Why the PodGroup `group_key` ("namespace/name") waits.

    `pods` may hold any pods (those of the group are picked out by namespace and
    `pod-group-name`), `events` events about the group and its pods, `queues` Queues
    by name, among them the group's if it exists (None: not read, no queue line).
    """
    problems: list[str] = []
    namespace, _, name = group_key.partition("/")
    members = sorted(
        (p for p in pods if group_name_of(p) == name and namespace_of(p) == namespace),
        key=lambda p: text(p, "metadata", "name"),
    )
    lines = [_pod_line(p, problems) for p in members]
    waiting = sum(1 for line in lines if line.waiting)
    shown = _event_lines(events)
    if group is None:
        message = f"PodGroup {group_key} does not exist (yet): its pods wait for it"
        return GroupAnswer(group_key, False, message, pods=lines, events=shown, problems=problems)
    pod_group = parsed(lambda: parse_pod_group(group, default_priority_classes()), problems)
    verdict = scheduling_reason(group)
    reason = since = None
    if verdict is not None:
        reason, message, since = verdict[0] or None, verdict[1], verdict[2] or None
    elif waiting:
        message = (
            f"no verdict yet: {waiting} pod(s) wait and the scheduler has written no reason "
            f"(the group is new, or {SCHEDULER_NAME} is not running)"
        )
    else:
        message = f"nothing waits: {len(lines)} pod(s), none pending"
    queue_name = text(group, "spec", "queue") or None
    amounts = None
    queue = (queues or {}).get(queue_name or "")
    if queue is not None:
        amounts = queue_amounts(queue, problems)[1]
    elif queues is not None:
        problems.append(f"PodGroup {group_key}: spec.queue: queue {queue_name!r} does not exist")
    return GroupAnswer(
        group_key,
        True,
        message,
        queue=queue_name,
        min_member=pod_group.min_member if pod_group is not None else None,
        reason=reason,
        since=since,
        queue_amounts=amounts,
        pods=lines,
        events=shown,
        problems=problems,
    )


def pending_groups(
    pod_groups: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> list[GroupAnswer]:
    """Every PodGroup with a pod waiting for a node, by key: what `kai why` lists with no target."""
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        name = group_name_of(pod)
        if name:
            by_group.setdefault(f"{namespace_of(pod)}/{name}", []).append(pod)
    answers = []
    for group in sorted(pod_groups, key=lambda g: key_of("PodGroup", g, namespaced=True)):
        key = key_of("PodGroup", group, namespaced=True)
        answer = explain_group(key, group, by_group.get(key, []))
        if answer.waiting:
            answers.append(answer)
    return answers


def pending_rows(answers: Sequence[GroupAnswer], all_namespaces: bool) -> list[tuple[str, ...]]:
    header = ("NAMESPACE",) if all_namespaces else ()
    rows: list[tuple[str, ...]] = [(*header, "PODGROUP", "QUEUE", "PENDING", "REASON", "MESSAGE")]
    for answer in answers:
        namespace, _, name = answer.group.partition("/")
        rows.append(
            (
                *((namespace,) if all_namespaces else ()),
                name,
                answer.queue or units.NOT_KNOWN,
                str(answer.waiting),
                answer.reason or units.NOT_KNOWN,
                answer.message,
            )
        )
    return rows


def _pod_line(manifest: Mapping[str, Any], problems: list[str]) -> PodLine:
    pod = read_pod(manifest, problems)
    phase = text(manifest, "status", "phase") or "Unknown"
    if field_at(manifest, "metadata", "deletionTimestamp"):
        phase = "Terminating"
    node = text(manifest, "spec", "nodeName") or None
    return PodLine(
        name=text(manifest, "metadata", "name"),
        phase=phase,
        node=node,
        gpu=units.gpu_ask(pod.gpu) if pod is not None else units.NOT_KNOWN,
        waiting=pod.phase is PodPhase.PENDING if pod is not None else node is None,
    )


def _event_lines(events: Sequence[Mapping[str, Any]]) -> list[EventLine]:
    """The latest events, oldest first, as kubectl describe lists them."""

    def when(event: Mapping[str, Any]) -> str:
        return (
            text(event, "lastTimestamp")
            or text(event, "eventTime")
            or text(event, "metadata", "creationTimestamp")
        )

    latest = sorted(events, key=when)[-MAX_EVENTS:]
    return [
        EventLine(
            when(event),
            text(event, "type"),
            text(event, "reason"),
            f"{text(event, 'involvedObject', 'kind')}/{text(event, 'involvedObject', 'name')}",
            text(event, "message"),
        )
        for event in latest
    ]


def _gpu_number(value: Resources | None) -> float | int | None:
    return None if value is None else value.to_json()["gpu"]
