"""The default shard tells pending pods of a pool without a live scheduler Lease, once each."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, cast

from kai.api.shards import Shard
from kai.kube.client import ApiError, Kube
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.unserved import (
    NO_SCHEDULER_FOR_NODE_POOL,
    UnservedPools,
    lease_serves,
    pending_by_pool,
)

POOL = "kai.scheduler/node-pool"
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _pod(name: str, pool: str | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if pool:
        metadata["labels"] = {POOL: pool}
    if "group" in spec:
        metadata["annotations"] = {"pod-group-name": spec.pop("group")}
    return {"metadata": metadata, "spec": {"schedulerName": "kai-scheduler", **spec}}


def _lease(renewed: datetime, duration: int = 15) -> dict[str, Any]:
    stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"spec": {"renewTime": stamp, "leaseDurationSeconds": duration}}


def test_pending_pods_by_their_pool_their_groups_label_first() -> None:
    pods = {
        "ml/b": _pod("b", "b"),
        "ml/c-via-group": _pod("c-via-group", group="g"),  # the group's pool, not the pod's
        "ml/bound": _pod("bound", "b", nodeName="n"),
        "ml/plain": _pod("plain"),
        "ml/other": {**_pod("other", "b"), "spec": {"schedulerName": "default-scheduler"}},
    }
    groups = {"ml/g": {"metadata": {"name": "g", "labels": {POOL: "c"}}}}
    found = pending_by_pool(Shard(), pods, groups)
    assert {pool: [p["metadata"]["name"] for p in pods] for pool, pods in found.items()} == {
        "b": ["b"],
        "c": ["c-via-group"],
    }


def test_a_lease_serves_while_renewed_within_the_grace_or_its_duration() -> None:
    assert lease_serves(_lease(NOW - timedelta(seconds=5)), NOW)
    assert not lease_serves(_lease(NOW - timedelta(seconds=120)), NOW)
    assert lease_serves(_lease(NOW - timedelta(seconds=120), duration=300), NOW)
    assert not lease_serves(None, NOW)
    assert not lease_serves({"spec": {}}, NOW)


class _Leases:
    def __init__(self, leases: Mapping[str, dict[str, Any]]) -> None:
        self.leases = dict(leases)
        self.failing = False

    async def get(self, path: str) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        if self.failing:
            raise ApiError("GET", path, 500, "InternalError", "down")
        if name not in self.leases:
            raise ApiError("GET", path, 404, "NotFound", "not found")
        return self.leases[name]


def _view(pods: Mapping[str, Any]) -> ClusterView:
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    return ClusterView(empty, MappingProxyType(dict(pods)), empty, empty, empty, empty, 1)


def test_each_pod_of_an_unserved_pool_is_told_once_and_again_after_its_pool_was_served() -> None:
    leases = _Leases({"kai-scheduler-a": _lease(NOW)})
    kube = cast(Kube, leases)
    events = EventRecorder(kube, "test")
    reporter = UnservedPools(kube, events, "kai-scheduler", "kai-scheduler", Shard())
    view = _view({"ml/a": _pod("a", "a"), "ml/b": _pod("b", "b"), "ml/d": _pod("d")})

    def told() -> list[tuple[str, str]]:
        queued = [(e["involvedObject"]["name"], e["message"]) for e in events._queued]
        assert all(e["reason"] == NO_SCHEDULER_FOR_NODE_POOL for e in events._queued)
        events.discard()
        return queued

    asyncio.run(reporter.report(view, NOW))
    ((name, message),) = told()
    assert name == "b" and "'b'" in message and "kai-scheduler/kai-scheduler-b" in message
    asyncio.run(reporter.report(view, NOW))
    assert told() == []  # once per pod, not once per cycle
    leases.failing = True
    asyncio.run(reporter.report(view, NOW))
    assert told() == []  # an unreadable Lease tells nothing, and forgets nothing
    leases.failing = False
    leases.leases["kai-scheduler-b"] = _lease(NOW)
    asyncio.run(reporter.report(view, NOW))
    assert told() == []
    del leases.leases["kai-scheduler-b"]
    asyncio.run(reporter.report(view, NOW + timedelta(seconds=1)))
    assert [name for name, _ in told()] == ["b"]
