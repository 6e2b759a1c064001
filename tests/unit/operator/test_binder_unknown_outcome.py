"""Binds whose answer leaves it unknown whether they committed: a 5xx, a dropped connection.

The real API server cannot be made to commit a bind and then fail to answer, so a
small in-process aiohttp server stands in for it here: it keeps one pod, commits a
Binding like the real server does (409 once the pod is bound), and can be told to
answer a committed or uncommitted bind with a 500 or by dropping the connection.
Everything the real server can answer (the 409 variants, leadership, gangs) is
tested against the real control plane in tests/integration/test_operator_binder.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from immutables import Map
from kubernetes_asyncio.client import ApiClient, Configuration

from kai.api.constants import GPU_GROUP_LABEL
from kai.api.pods import parse_pod
from kai.engine.cycle import Binding, CycleResult, SolverReport
from kai.engine.model import EngineConfig, PodGroup, Snapshot
from kai.kube.client import Kube
from kai.kube.owners import OwnerReader
from kai.operator.backoff import BindBackoff
from kai.operator.binder import UNKNOWN_ANSWERS_LIMIT, Binder, BindReport, Held, SentBind
from kai.operator.cache import ClusterCache, ClusterView
from kai.operator.events import EventRecorder
from kai.operator.gpu_sharing import GpuSharing
from kai.operator.loop import SchedulingLoop
from kai.operator.metrics import Metrics
from kai.operator.pod_grouper import PodGrouper
from kai.operator.snapshot import Assumed, SnapshotBuilder
from kai.operator.stamps import StampWriter
from kai.operator.status import StatusWriter

NAMESPACE = "team"
POD = "worker"
NODE = "gpu-1"
GROUP = PodGroup(NAMESPACE, "gang", "queue", 1, 50, True)


@dataclass
class FakeApiServer:
    """One pod and its writes; `fault` says how the next Binding POSTs are answered."""

    fault: str = "none"  # none | commit-then-500 | commit-then-drop | 500 | drop
    pod: dict[str, Any] = field(default_factory=dict)
    hold: asyncio.Event | None = None
    """When given, a Binding POST is answered only once it is set."""
    binding_posts: int = 0
    label_patches: list[dict[str, Any]] = field(default_factory=list)

    async def binding(self, request: web.Request) -> web.StreamResponse:
        self.binding_posts += 1
        body = await request.json()
        if self.hold is not None:
            await self.hold.wait()
        if self.fault in ("commit-then-500", "commit-then-drop", "none"):
            if self.pod["spec"].get("nodeName"):
                return _status(409, "Conflict", f"pod {POD} is already assigned")
            self.pod["spec"]["nodeName"] = body["target"]["name"]
        if self.fault.endswith("500"):
            return _status(500, "InternalError", "etcdserver: request timed out")
        if self.fault.endswith("drop"):
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        return web.json_response(body, status=201)

    async def get_pod(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.pod)

    async def patch_pod(self, request: web.Request) -> web.StreamResponse:
        patch = json.loads(await request.read())
        labels = (patch.get("metadata") or {}).get("labels") or {}
        self.label_patches.append(labels)
        self.pod["metadata"].setdefault("labels", {}).update(labels)
        return web.json_response(self.pod)

    async def created(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(await request.json(), status=201)


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "status": "Failure", "reason": reason, "message": message}, status=code
    )


def _pod_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "namespace": NAMESPACE,
            "uid": "uid-worker",
            "resourceVersion": "1",
            "labels": {"kai.scheduler/queue": "queue"},
            "annotations": {"gpu-fraction": "0.5"},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "none"}],
        },
        "status": {"phase": "Pending"},
    }


@dataclass
class Harness:
    server: FakeApiServer
    binder: Binder
    backoff: BindBackoff
    kube: Kube


@pytest_asyncio.fixture(loop_scope="function")
async def harness() -> AsyncIterator[Harness]:
    server = FakeApiServer(pod=_pod_manifest())
    app = web.Application()
    pod_path = f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}"
    app.router.add_post(f"{pod_path}/binding", server.binding)
    app.router.add_get(pod_path, server.get_pod)
    app.router.add_patch(pod_path, server.patch_pod)
    app.router.add_post("/api/v1/namespaces/{namespace}/{kind}", server.created)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with _kube(f"http://127.0.0.1:{port}") as kube:
        backoff = BindBackoff()
        binder = _binder(kube, backoff)
        try:
            yield Harness(server, binder, backoff, kube)
        finally:
            await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="function")
async def unreachable() -> AsyncIterator[Harness]:
    """A binder whose API server address accepts no connections."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    async with _kube(f"http://127.0.0.1:{port}") as kube:
        backoff = BindBackoff()
        yield Harness(FakeApiServer(pod=_pod_manifest()), _binder(kube, backoff), backoff, kube)


@contextlib.asynccontextmanager
async def _kube(host: str) -> AsyncIterator[Kube]:
    async with ApiClient(Configuration(host=host)) as client:
        yield Kube(client)


def _binder(kube: Kube, backoff: BindBackoff) -> Binder:
    sharing = GpuSharing(kube, "kai-resource-reservation", "none", None, 4)
    events = EventRecorder(kube, "test")
    return Binder(kube, sharing, backoff, events, 4, lambda: True)


async def _no_grouping(_: str) -> dict[str, str]:
    return {}


async def _bind(
    harness: Harness,
    *,
    shared: bool,
    resends: list[SentBind] = [],  # noqa: B006
    answered: asyncio.Event | None = None,
) -> BindReport:
    manifest = harness.server.pod
    pod = parse_pod(manifest, GROUP.key)
    gpu_groups = ("group-a",) if shared else ()
    bindings = [] if resends else [Binding(pod.key, NODE, Fraction(1, 2), gpu_groups)]
    return await harness.binder.bind(
        bindings,
        {pod.key: pod},
        {GROUP.key: GROUP},
        {pod.key: manifest},
        {},
        _no_grouping,
        resends,
        answered=answered,
    )


def _resend(report: BindReport) -> SentBind:
    (held,) = report.held.values()
    assert held.resend is not None
    return held.resend


@pytest.mark.parametrize("fault", ["commit-then-500", "commit-then-drop"])
async def test_a_bind_that_committed_without_an_answer_is_held_then_confirmed(
    harness: Harness, fault: str
) -> None:
    harness.server.fault = fault
    first = await _bind(harness, shared=True)
    assert first.failed == {}
    assert first.unknown == [f"{NAMESPACE}/{POD}"]
    # Held on the node with its shared device; the sharing is not undone; no backoff.
    (held,) = first.held.values()
    assert held.placement == Assumed(NODE, ("group-a",))
    assert all(labels.get(GPU_GROUP_LABEL) is not None for labels in harness.server.label_patches)
    assert harness.backoff.held(now=0.0) == {}

    harness.server.fault = "none"
    second = await _bind(harness, shared=True, resends=[_resend(first)])
    assert second.bound == {f"{NAMESPACE}/{POD}": Assumed(NODE, ("group-a",))}
    assert second.held == {"uid-worker": Held(f"{NAMESPACE}/{POD}", Assumed(NODE, ("group-a",)))}
    assert harness.server.binding_posts == 1  # the read showed it bound: nothing sent again


async def test_a_bind_dropped_before_it_committed_is_sent_again(harness: Harness) -> None:
    harness.server.fault = "drop"
    first = await _bind(harness, shared=False)
    assert first.unknown == [f"{NAMESPACE}/{POD}"]
    harness.server.fault = "none"
    second = await _bind(harness, shared=False, resends=[_resend(first)])
    assert second.bound == {f"{NAMESPACE}/{POD}": Assumed(NODE, ())}
    assert harness.server.binding_posts == 2
    assert harness.server.pod["spec"]["nodeName"] == NODE


async def test_a_bind_that_never_commits_stops_holding_the_node(harness: Harness) -> None:
    harness.server.fault = "500"
    report = await _bind(harness, shared=True)
    for _ in range(UNKNOWN_ANSWERS_LIMIT):
        assert report.unknown == [f"{NAMESPACE}/{POD}"]
        assert harness.backoff.held(now=0.0) == {}
        report = await _bind(harness, shared=True, resends=[_resend(report)])
    assert report.held == {}
    assert list(report.failed) == [f"{NAMESPACE}/{POD}"]
    assert GROUP.key in harness.backoff.held(now=0.0)
    assert harness.server.label_patches[-1] == {GPU_GROUP_LABEL: None}  # sharing undone
    assert harness.server.binding_posts == UNKNOWN_ANSWERS_LIMIT


async def test_a_bind_that_never_reached_the_server_fails_at_once(unreachable: Harness) -> None:
    report = await _bind(unreachable, shared=False)
    assert report.held == {}
    assert list(report.failed) == [f"{NAMESPACE}/{POD}"]
    assert GROUP.key in unreachable.backoff.held(now=0.0)


async def test_the_loop_holds_a_bind_of_unknown_outcome_until_it_is_settled(
    harness: Harness,
) -> None:
    """The scheduling loop's side: held by uid across cycles, sent again, forgotten when the
    pod is replaced; never by the clock."""
    loop = _loop(harness)
    pod = parse_pod(harness.server.pod, GROUP.key)
    snapshot = Snapshot((), (pod,), (GROUP,), (), datetime.now(UTC))
    view = _view(harness.server.pod)

    harness.server.fault = "500"
    bound, started = await loop._bind(
        _result(Binding(pod.key, NODE, Fraction(1), ())), snapshot, view, _no_grouping
    )
    assert bound == {}
    assert started == set()
    loop._prune_assumed(view)  # the cache still shows the pod unbound: it stays held
    assert [held.placement for held in loop._assumed.values()] == [Assumed(NODE, ())]

    harness.server.fault = "none"
    bound, started = await loop._bind(_result(), snapshot, view, _no_grouping)  # none proposed
    assert bound == {pod.key: Assumed(NODE, ())}  # the held bind was sent again, and took
    assert started == {GROUP.key}  # its group counts as started, as a new bind's would
    assert harness.server.binding_posts == 2

    replaced = _pod_manifest()
    replaced["metadata"]["uid"] = "uid-newer-worker"
    loop._prune_assumed(_view(replaced))
    assert loop._assumed == {}


def _loop(harness: Harness) -> SchedulingLoop:
    kube = harness.kube
    events = EventRecorder(kube, "test")
    sharing = GpuSharing(kube, "kai-resource-reservation", "none", None, 4)
    return SchedulingLoop(
        cache=ClusterCache(kube),
        builder=SnapshotBuilder("kai-resource-reservation"),
        grouper=PodGrouper(kube, OwnerReader(kube), events, "kai-resource-reservation", 4),
        binder=harness.binder,
        sharing=sharing,
        status=StatusWriter(kube, events, 4),
        stamps=StampWriter(kube, 4),
        events=events,
        backoff=harness.backoff,
        metrics=Metrics(),
        engine=EngineConfig(),
        executor=ThreadPoolExecutor(max_workers=1),
        period_seconds=1.0,
        debounce_seconds=0.0,
        is_leader=lambda: True,
        failed_cycles_unhealthy=5,
    )


def _result(*bindings: Binding) -> CycleResult:
    report = SolverReport("greedy", "test", Fraction(0), Fraction(0), Fraction(0), 0)
    return CycleResult(bindings, Map(), {}, report)


def _view(pod: dict[str, Any]) -> ClusterView:
    return ClusterView({}, {f"{NAMESPACE}/{POD}": pod}, {}, {}, {}, {}, 0)


async def test_answered_is_set_once_the_first_bind_is_settled_not_once_it_is_sent(
    harness: Harness,
) -> None:
    """A burst's next cycle plans once the first bind handed over is settled (see
    `_Handoff.answered`): the binder says when, not when the bind was sent."""
    release = asyncio.Event()
    harness.server.hold = release
    answered = asyncio.Event()
    bind = asyncio.ensure_future(_bind(harness, shared=False, answered=answered))
    try:
        deadline = time.monotonic() + 60
        while harness.server.binding_posts == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert harness.server.binding_posts == 1
        assert not answered.is_set()  # the server has the POST and has not answered it
        release.set()
        report = await asyncio.wait_for(bind, 60)
    finally:
        release.set()
        bind.cancel()
    assert answered.is_set()
    assert list(report.bound) == [f"{NAMESPACE}/{POD}"]


async def test_answered_is_set_when_there_is_no_bind_to_make(harness: Harness) -> None:
    answered = asyncio.Event()
    report = await harness.binder.bind([], {}, {}, {}, {}, _no_grouping, answered=answered)
    assert answered.is_set()
    assert not report.bound
