"""Kubernetes Events the scheduler writes: Scheduled, Unschedulable, evictions, grouping problems.

Events are queued during a cycle and sent together at its end. Callers decide
when something is worth an event (on a change, not every cycle); this module
bounds how many go out per cycle, so a cluster of pending pods whose message keeps
changing cannot flood the API server.

While a burst of new pods lasts (the cycle left pods for the next ones), the
`Scheduled` events are held and sent with the first flush after it: each is one
more write per bound pod on the API server the burst's binds are waiting for (a
PodGroup, a Binding and the event: a third of a burst's writes). An event keeps the
time it was recorded at, so the pod's history reads the same, only later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from kai.kube.client import Kube
from kai.kube.writes import run_bounded

log = structlog.get_logger(__name__)

COMPONENT = "kai-scheduler"
NORMAL, WARNING = "Normal", "Warning"
SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
EVICTED = "Evicted"
GROUPING_FAILED = "PodGroupingFailed"
_MESSAGE_LIMIT = 1024


@dataclass(frozen=True)
class InvolvedObject:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> InvolvedObject:
        metadata = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion") or "v1"),
            str(obj.get("kind") or "Pod"),
            str(metadata.get("namespace") or "default"),
            str(metadata.get("name") or ""),
            str(metadata.get("uid") or ""),
        )


class EventRecorder:
    """Queues events during a cycle and sends at most `per_cycle` of them on flush; holds
    at most `held_limit` Scheduled events while a burst lasts."""

    def __init__(
        self,
        kube: Kube,
        instance: str,
        per_cycle: int = 500,
        concurrency: int = 16,
        held_limit: int = 10_000,
    ) -> None:
        self._kube = kube
        self._instance = instance
        self._per_cycle = per_cycle
        self._concurrency = concurrency
        self._held_limit = held_limit
        self._queued: list[dict[str, Any]] = []
        self._held: list[dict[str, Any]] = []
        self.dropped = 0

    def record(self, about: InvolvedObject, kind: str, reason: str, message: str) -> None:
        if len(self._queued) >= self._per_cycle:
            self.dropped += 1
            return
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        self._queued.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{about.name}.", "namespace": about.namespace},
                "involvedObject": {
                    "apiVersion": about.api_version,
                    "kind": about.kind,
                    "namespace": about.namespace,
                    "name": about.name,
                    "uid": about.uid,
                },
                "type": kind,
                "reason": reason,
                "message": message[:_MESSAGE_LIMIT],
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": self._instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )

    def discard(self) -> None:
        """Forget the queued and held events unsent: a replica that lost the Lease writes
        nothing."""
        self._queued = []
        self._held = []

    async def flush(self, burst_continues: bool = False) -> None:
        """Send the cycle's events; while a burst continues, hold its Scheduled events, and
        send those held once it has ended."""
        queued, self._queued = self._queued, []
        if burst_continues:
            scheduled = [event for event in queued if event["reason"] == SCHEDULED]
            room = max(self._held_limit - len(self._held), 0)
            self._held.extend(scheduled[:room])
            self.dropped += max(len(scheduled) - room, 0)
            queued = [event for event in queued if event["reason"] != SCHEDULED]
        else:
            queued, self._held = [*self._held, *queued], []
        writes = [(index, _creator(self._kube, event)) for index, event in enumerate(queued)]
        failures = await run_bounded(writes, self._concurrency)
        for error in list(failures.values())[:3]:
            log.warning("event not recorded", error=str(error))


def _creator(kube: Kube, event: dict[str, Any]) -> Any:
    namespace = event["metadata"]["namespace"]
    return lambda: kube.create(f"/api/v1/namespaces/{namespace}/events", event)
