"""The binder against the real API server: what its answers mean, and faults kept to one pod.

The binder (and, for new groups and gangs, the pod grouper's writes) runs here on its own, on a
real client, so each test can set up the exact case: a pod bound elsewhere,
replaced, gated or being deleted; a leader that learns it lost the Lease halfway;
a sub-group label patch refused by an admission policy; one bind or eviction that
raises. Faults the real server cannot produce on demand (a bind that commits and
then gets no answer) are in tests/unit/operator/test_binder_unknown_outcome.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
import pytest_asyncio
from kai_operator_support import unique, wait_for

from kai.api.changes import LoggedObjects
from kai.api.constants import SUBGROUP_LABEL
from kai.api.podgroups import LAST_START_ANNOTATION, parse_pod_group
from kai.api.pods import parse_pod
from kai.engine.cycle import Binding
from kai.engine.evictions.decisions import Action, Eviction
from kai.engine.model import Pod, PodGroup
from kai.grouping import PodGroupPlan, grouped_manifest
from kai.kube.client import ApiError, Kube, connect
from kai.operator.backoff import BindBackoff
from kai.operator.binder import Binder, BindReport, Held, still_held
from kai.operator.cache import ClusterCache, ClusterView
from kai.operator.events import EventRecorder
from kai.operator.gpu_sharing import GpuSharing
from kai.operator.group_writes import GroupWrites, Written
from kai.operator.snapshot import Assumed
from kai.testing.controlplane import ClusterAccess
from kai.testing.fakes import GpuNode, NodeFactory

QUEUE = "binder-test"
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
POLICY_BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
PodGroupManifest = dict[str, Any]


class FaultyKube(Kube):
    """The real client, except that writes to the paths `fails` picks raise a bug's exception.

    An unexpected exception is by nature one the real server cannot cause, so it is
    injected here; everything else goes to the real API server.
    """

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.fails: Callable[[str, str], bool] = lambda method, path: False

    async def write(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        proceed: Callable[[], bool] | None = None,
    ) -> None:
        if self.fails(method, path):
            raise RuntimeError(f"injected bug on {method} {path}")
        await super().write(method, path, body, content_type, timeout, proceed)


@dataclass
class Kit:
    """A binder on a real client, and helpers to make pods in the test's namespace."""

    kube: FaultyKube
    namespace: str
    nodes: list[str]
    backoff: BindBackoff
    leading: bool = True

    def binder(self, concurrency: int = 8) -> Binder:
        sharing = GpuSharing(self.kube, "kai-resource-reservation", "none", None, 4)
        events = EventRecorder(self.kube, "binder-test")
        return Binder(self.kube, sharing, self.backoff, events, concurrency, lambda: self.leading)

    def pod_path(self, name: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{name}"

    async def make_pod(self, name: str, **spec: Any) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "labels": {"kai.scheduler/queue": QUEUE}}
        if "finalizers" in spec:
            metadata["finalizers"] = spec.pop("finalizers")
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "schedulerName": "kai-scheduler",
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "main",
                        "image": "example.invalid/none",
                        "resources": {"requests": {"cpu": "100m"}},
                    }
                ],
                **spec,
            },
        }
        await self.kube.create(f"/api/v1/namespaces/{self.namespace}/pods", manifest)
        return await self.kube.get(self.pod_path(name))

    async def node_of(self, name: str) -> str | None:
        try:
            manifest = await self.kube.get(self.pod_path(name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        node = (manifest.get("spec") or {}).get("nodeName")
        return str(node) if node else None

    async def post_binding(self, pod: Mapping[str, Any], node: str) -> None:
        name = pod["metadata"]["name"]
        await self.kube.create(
            f"{self.pod_path(name)}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "uid": pod["metadata"]["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
        )


@pytest_asyncio.fixture
async def kit(
    control_plane: ClusterAccess, namespace: str, gpu_nodes: NodeFactory
) -> AsyncIterator[Kit]:
    nodes = [unique("gpu") for _ in range(2)]
    for name in nodes:
        await gpu_nodes(GpuNode(name=name, gpus=8))
    client = await connect(control_plane.kubeconfig)
    async with client:
        # Holds that outlast the test: what a hold says must not depend on how fast it runs.
        yield Kit(FaultyKube(client), namespace, nodes, BindBackoff(base_seconds=3600.0))


def _single(manifest: Mapping[str, Any]) -> tuple[Pod, PodGroup]:
    """The engine's pod, alone in a gang of one named after it."""
    name = manifest["metadata"]["name"]
    namespace = manifest["metadata"]["namespace"]
    group = PodGroup(namespace, f"group-{name}", QUEUE, 1, 50, True)
    return parse_pod(manifest, group.key), group


async def _no_grouping(_: str) -> dict[str, str]:
    return {}


async def _bind_singles(
    kit: Kit,
    binder: Binder,
    manifests: Iterable[Mapping[str, Any]],
    node: str,
    after: asyncio.Event | None = None,
) -> BindReport:
    """Bind each pod, each its own gang of one, to `node` (once `after` is set)."""
    pods: dict[str, Pod] = {}
    groups: dict[str, PodGroup] = {}
    for manifest in manifests:
        pod, group = _single(manifest)
        pods[pod.key] = pod
        groups[group.key] = group
    bindings = [Binding(key, node, Fraction(0), ()) for key in pods]
    by_key = {f"{m['metadata']['namespace']}/{m['metadata']['name']}": m for m in manifests}
    return await binder.bind(bindings, pods, groups, by_key, {}, _no_grouping, after=after)


async def test_binds_handed_over_early_go_out_once_the_previous_binds_are_done(kit: Kit) -> None:
    """A burst's next cycle hands its binds to the binder while the previous cycle's are
    still going out: none is sent before those are done, and every one is sent after."""
    earlier = [await kit.make_pod(f"earlier-{index}") for index in range(4)]
    later = [await kit.make_pod(f"later-{index}") for index in range(4)]
    earlier_done = asyncio.Event()
    too_soon: list[str] = []

    def records_too_soon(_: str, path: str) -> bool:
        if "/later-" in path and not earlier_done.is_set():
            too_soon.append(path)
        return False  # fails none

    kit.kube.fails = records_too_soon

    async def earlier_cycle() -> BindReport:
        try:
            return await _bind_singles(kit, kit.binder(), earlier, kit.nodes[0])
        finally:
            earlier_done.set()

    first, second = await asyncio.gather(
        earlier_cycle(), _bind_singles(kit, kit.binder(), later, kit.nodes[1], earlier_done)
    )
    assert too_soon == []
    assert len(first.bound) == len(second.bound) == 4
    assert {await kit.node_of(f"later-{index}") for index in range(4)} == {kit.nodes[1]}


async def test_a_conflict_is_read_to_decide_what_it_means(kit: Kit) -> None:
    """409 means "already bound" only when the pod reads bound; 404 means the pod is gone."""
    bound_node, target = kit.nodes
    elsewhere = await kit.make_pod("elsewhere")
    await kit.post_binding(elsewhere, bound_node)
    replaced = await kit.make_pod("replaced")  # the scheduler's copy: the first pod's uid
    await kit.kube.delete(kit.pod_path("replaced"))
    await kit.make_pod("replaced")
    gated = await kit.make_pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    terminating = await kit.make_pod("terminating", finalizers=["example.com/hold"])
    await kit.kube.delete(kit.pod_path("terminating"))
    deleted = await kit.make_pod("deleted")
    await kit.kube.delete(kit.pod_path("deleted"))
    try:
        report = await _bind_singles(
            kit, kit.binder(), [elsewhere, replaced, gated, terminating, deleted], target
        )
        key = f"{kit.namespace}/"
        # Scheduling gates: a refusal of a pod that is still there; only its group backs off.
        assert list(report.failed) == [f"{key}gated"]
        assert set(kit.backoff.held(time.monotonic())) == {f"{key}group-gated"}
        assert report.bound == {}
        # Bound to another node: already bound, held where it is until the watch shows it.
        assert report.held == {
            elsewhere["metadata"]["uid"]: Held(f"{key}elsewhere", Assumed(bound_node, ()))
        }
        # Replaced (uid mismatch), being deleted, deleted: dropped, nothing backs off.
        assert report.dropped == {f"{key}replaced", f"{key}terminating", f"{key}deleted"}
        assert await kit.node_of("replaced") is None
        assert await kit.node_of("elsewhere") == bound_node
    finally:
        await kit.kube.merge_patch(kit.pod_path("terminating"), {"metadata": {"finalizers": None}})


async def test_a_deposed_leader_sends_no_further_bind(kit: Kit) -> None:
    """Leadership is checked before every bind: the first bind's answer brings the news."""
    manifests = [await kit.make_pod(f"member-{index}") for index in range(3)]
    group = PodGroup(kit.namespace, "gang", QUEUE, 1, 50, True)
    pods = {p.key: p for p in (parse_pod(m, group.key) for m in manifests)}

    def lose_the_lease_while_the_first_bind_is_sent(method: str, path: str) -> bool:
        if path.endswith("/binding"):
            kit.leading = False
        return False

    kit.kube.fails = lose_the_lease_while_the_first_bind_is_sent
    bindings = [Binding(key, kit.nodes[0], Fraction(0), ()) for key in pods]
    report = await kit.binder(concurrency=1).bind(
        bindings, pods, {group.key: group}, {}, {}, _no_grouping
    )
    assert len(report.bound) == 1
    assert report.skipped_not_leader == 2
    bound = [m["metadata"]["name"] for m in manifests if await kit.node_of(m["metadata"]["name"])]
    assert bound == [pods[next(iter(report.bound))].name]


async def test_one_bind_that_raises_leaves_the_others_bound(kit: Kit) -> None:
    names = ("first", "raises-after-sending", "raises-before-sending", "last")
    manifests = {name: await kit.make_pod(name) for name in names}
    kit.kube.fails = lambda method, path: path.endswith("/raises-after-sending/binding")
    binder = kit.binder()
    pods: dict[str, Pod] = {}
    groups: dict[str, PodGroup] = {}
    for manifest in manifests.values():
        pod, group = _single(manifest)
        pods[pod.key] = pod
        groups[group.key] = group
    key = f"{kit.namespace}/"
    # A fractional pod whose manifest the binder is not given: a KeyError before any write.
    bindings = [
        Binding(f"{key}{name}", kit.nodes[0], Fraction(1, 2), ("dev-1",))
        if name == "raises-before-sending"
        else Binding(f"{key}{name}", kit.nodes[0], Fraction(0), ())
        for name in names
    ]
    report = await binder.bind(bindings, pods, groups, {}, {}, _no_grouping)
    assert set(report.bound) == {f"{key}first", f"{key}last"}
    assert report.unknown == [f"{key}raises-after-sending"]  # may have been sent: held
    assert list(report.failed) == [f"{key}raises-before-sending"]
    assert await kit.node_of("first") == kit.nodes[0]
    assert await kit.node_of("last") == kit.nodes[0]


async def test_one_eviction_that_raises_leaves_the_others_evicted(kit: Kit) -> None:
    names = ("victim-a", "victim-raises", "victim-b")
    manifests = {name: await kit.make_pod(name) for name in names}
    for manifest in manifests.values():
        await kit.post_binding(manifest, kit.nodes[0])
    kit.kube.fails = lambda method, path: path.endswith("/victim-raises/status")
    pods = {pod.key: pod for pod in (_single(m)[0] for m in manifests.values())}
    evictions = [
        Eviction(key, pods[key].group, kit.nodes[0], Action.RECLAIM, "test", None) for key in pods
    ]
    evicted = await kit.binder().evict(evictions, pods)
    assert sorted(evicted) == [f"{kit.namespace}/victim-a", f"{kit.namespace}/victim-b"]

    async def victims_gone() -> bool:
        return all([await kit.node_of(name) is None for name in ("victim-a", "victim-b")])

    await wait_for("the two victims to be deleted", victims_gone, timeout=60)
    assert await kit.node_of("victim-raises") == kit.nodes[0]


async def test_a_held_bind_is_forgotten_when_its_pod_is_replaced(kit: Kit) -> None:
    """Held binds are keyed by uid: a pod recreated under the same name inherits nothing."""
    first = await kit.make_pod("web-0")
    report = await _bind_singles(kit, kit.binder(), [first], kit.nodes[0])
    assert set(report.held) == {first["metadata"]["uid"]}
    await kit.kube.delete(kit.pod_path("web-0"))
    second = await kit.make_pod("web-0")
    cache = ClusterCache(kit.kube)
    async with _running(cache):
        await cache.wait_synced()
        view = await _view_when(cache, lambda v: _uid(v, kit, "web-0") == second["metadata"]["uid"])
    assert still_held(report.held, view.pods) == {}


async def test_a_held_bind_is_kept_until_the_cache_shows_it_bound(kit: Kit) -> None:
    pod = await kit.make_pod("slow-watch")
    cache = ClusterCache(kit.kube)
    async with _running(cache):
        await cache.wait_synced()
        unbound = await _view_when(cache, lambda v: _uid(v, kit, "slow-watch") is not None)
        report = await _bind_singles(kit, kit.binder(), [pod], kit.nodes[0])
        # What the cache showed before the bind: still held (no time limit on it).
        assert set(still_held(report.held, unbound.pods)) == {pod["metadata"]["uid"]}
        bound = await _view_when(cache, lambda v: _node(v, kit, "slow-watch") == kit.nodes[0])
    assert still_held(report.held, bound.pods) == {}


async def test_the_cache_hands_out_one_view_until_something_changes(kit: Kit) -> None:
    """A cycle takes several views; while no watch event changed the cache they are one
    object (copying and cutting thousands of objects again gave the same), and the first
    after a change shows it, and says which keys changed."""
    cache = ClusterCache(kit.kube)
    async with _running(cache):
        await cache.wait_synced()
        first = cache.view()
        assert cache.view() is first
        await kit.make_pod("late")
        later = await _view_when(cache, lambda v: _uid(v, kit, "late") is not None)
    assert later is not first
    assert _uid(first, kit, "late") is None
    # Each store's copy knows what changed since an earlier one: the pod the watch brought.
    assert isinstance(first.pods, LoggedObjects) and isinstance(later.pods, LoggedObjects)
    assert f"{kit.namespace}/late" in (later.pods.log.since(first.pods.place) or ())


async def test_the_cache_tells_a_new_pod_waiting_for_kai_from_other_changes(kit: Kit) -> None:
    """The loop starts a cycle at once for a pod that waits for kai (`pod_arrived`) and
    lets other changes settle: pods of another scheduler or already on a node, and
    changes to a pod the cache holds. The flag is set as the watch event is applied, so
    a view that shows the event shows the flag."""
    cache = ClusterCache(kit.kube)
    async with _running(cache):
        await cache.wait_synced()
        cache.pod_arrived.clear()
        await kit.make_pod("elsewhere", schedulerName="default-scheduler")
        await kit.make_pod("placed", nodeName=kit.nodes[0])
        await _view_when(
            cache, lambda v: None not in (_uid(v, kit, "elsewhere"), _uid(v, kit, "placed"))
        )
        assert not cache.pod_arrived.is_set()
        waiting = await kit.make_pod("waiting")
        await _view_when(cache, lambda v: _uid(v, kit, "waiting") is not None)
        assert cache.pod_arrived.is_set()
        cache.pod_arrived.clear()
        await kit.post_binding(waiting, kit.nodes[0])
        await _view_when(cache, lambda v: _node(v, kit, "waiting") == kit.nodes[0])
        assert not cache.pod_arrived.is_set()


@pytest.mark.parametrize(("min_member", "bound"), [(3, set()), (2, {"worker-0", "worker-2"})])
async def test_a_gang_is_not_bound_below_its_minimum_when_a_label_patch_fails(
    kit: Kit, min_member: int, bound: set[str]
) -> None:
    """The real grouping writes and binder; an admission policy refuses worker-1's label."""
    async with _refusing_subgroup_label(kit, "worker-1"):
        report = await _group_and_bind_gang(kit, min_member)
    assert {name for name in GANG if await kit.node_of(name)} == bound
    assert set(report.bound) == {f"{kit.namespace}/{name}" for name in bound}
    if not bound:
        assert report.held_back == {f"{kit.namespace}/gang": [f"{kit.namespace}/{n}" for n in GANG]}


async def test_a_grouping_write_that_raises_holds_back_only_its_gang(kit: Kit) -> None:
    """An unexpected exception in worker-1's label patch stays with worker-1's gang."""
    kit.kube.fails = lambda method, path: method == "PATCH" and path == kit.pod_path("worker-1")
    loner = await kit.make_pod("loner")
    report = await _group_and_bind_gang(kit, 3, also=[loner])
    assert report.held_back == {f"{kit.namespace}/gang": [f"{kit.namespace}/{n}" for n in GANG]}
    assert set(report.bound) == {f"{kit.namespace}/loner"}
    assert [name for name in (*GANG, "loner") if await kit.node_of(name)] == ["loner"]


async def test_a_group_bound_during_a_burst_is_owed_and_written_after_it(kit: Kit) -> None:
    """While a burst continues, a new group whose pod is bound is not written in the cycle:
    the bind carries the annotation at once, and the group, with its start, comes in the
    first cycle after the burst."""
    manifest = await kit.make_pod("burst-0")
    plan = _single_plan(kit.namespace, "pg-burst-0")
    key = f"{kit.namespace}/burst-0"
    group_path = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{kit.namespace}/podgroups/pg-burst-0"
    starts = {f"{kit.namespace}/pg-burst-0": {LAST_START_ANNOTATION: "2026-12-04T10:00:00Z"}}
    settled: list[tuple[str, PodGroupPlan, Written]] = []
    view = _view(kit, {"burst-0": manifest})
    writes = GroupWrites(
        kit.kube, view, {key: plan}, 4, lambda k, _, p, w: settled.append((k, p, w)), defer=True
    )
    async with writes as grouping:
        grouping.decided([key], starts)
        report = await _bind_planned(kit, grouping, {key: plan}, view)
        await grouping.finish(report.bound.keys())
    assert await kit.node_of("burst-0") == kit.nodes[0]
    bound = await kit.kube.get(kit.pod_path("burst-0"))
    assert bound["metadata"]["annotations"]["pod-group-name"] == "pg-burst-0"
    with pytest.raises(ApiError) as missing:
        await kit.kube.get(group_path)
    assert missing.value.status == 404
    ((settled_key, owed, outcome),) = settled
    assert (settled_key, outcome) == (key, Written.GROUP_OWED)
    assert owed.manifest["metadata"]["annotations"] == starts[f"{kit.namespace}/pg-burst-0"]
    assert grouping.stamped == starts  # the create to come carries it: no patch

    written: list[tuple[str, bool]] = []
    after = GroupWrites(
        kit.kube, _view(kit, {}), {}, 4, lambda *_: None,
        owed={f"{kit.namespace}/pg-burst-0": owed}, settle_owed=lambda g, ok: written.append((g, ok)),
    )  # fmt: skip
    async with after as grouping:
        grouping.decided([], {})
        await grouping.finish([])
    assert written == [(f"{kit.namespace}/pg-burst-0", True)]
    group = await kit.kube.get(group_path)
    assert group["metadata"]["annotations"][LAST_START_ANNOTATION] == "2026-12-04T10:00:00Z"


@pytest.mark.parametrize("earlier_binding", [False, True])
async def test_the_cycle_that_ends_a_burst_writes_its_groups_after_its_binds(
    kit: Kit, earlier_binding: bool
) -> None:
    """A group the cycle binds whole is created after its bind: the burst's last binds
    share the API server with nothing. With groups owed by the burst they are created
    then too; or the cycle before is still binding and owes nothing yet (`ends_burst`)."""
    manifest = await kit.make_pod("last-0")
    key, owed_key = f"{kit.namespace}/last-0", f"{kit.namespace}/pg-earlier-0"
    plans = {key: _single_plan(kit.namespace, "pg-last-0")}
    sent: list[str] = []

    def records(_: str, path: str) -> bool:
        sent.append(path)
        return False  # fails none

    kit.kube.fails = records
    settled: dict[str, Written] = {}
    view = _view(kit, {"last-0": manifest})
    owed = {} if earlier_binding else {owed_key: _single_plan(kit.namespace, "pg-earlier-0")}
    writes = GroupWrites(
        kit.kube, view, plans, 4, lambda k, _, p, w: settled.update({k: w}),
        owed=owed, ends_burst=earlier_binding, settle_owed=lambda *_: None,
    )  # fmt: skip
    async with writes as grouping:
        grouping.decided([key], {})
        report = await _bind_planned(kit, grouping, plans, view)
        sent_with_the_binds = list(sent)
        await grouping.finish(report.bound.keys())
    assert [path.rpartition("/")[2] for path in sent_with_the_binds] == ["binding"]
    assert settled[key] is Written.ALL
    collection = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{kit.namespace}/podgroups"
    names = {g["metadata"]["name"] for g in (await kit.kube.get(collection))["items"]}
    assert {"pg-last-0", *(plan.name for plan in owed.values())} <= names


async def test_a_group_bound_whole_outside_a_burst_is_written_beside_its_bind(kit: Kit) -> None:
    """Its bind does not wait for its create; the cycle still ends with both written. A pod
    of such a group that is not bound after all gets its group and its annotation patched."""
    manifests = {name: await kit.make_pod(name) for name in ("after-0", "after-1")}
    plans = {f"{kit.namespace}/{n}": _single_plan(kit.namespace, f"pg-{n}") for n in manifests}
    await kit.kube.delete(kit.pod_path("after-1"))  # its bind fails: the pod is gone
    settled: dict[str, Written] = {}
    view = _view(kit, manifests)
    writes = GroupWrites(kit.kube, view, plans, 4, lambda k, _, p, w: settled.update({k: w}))
    async with writes as grouping:
        grouping.decided(list(plans), {})
        report = await _bind_planned(kit, grouping, plans, view)
        await grouping.finish(report.bound.keys())
    assert set(report.bound) == {f"{kit.namespace}/after-0"}
    assert settled[f"{kit.namespace}/after-0"] is Written.ALL
    assert settled[f"{kit.namespace}/after-1"] is Written.GROUP_ONLY  # the patch found no pod
    collection = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{kit.namespace}/podgroups"
    names = {g["metadata"]["name"] for g in (await kit.kube.get(collection))["items"]}
    assert {"pg-after-0", "pg-after-1"} <= names


async def _bind_planned(
    kit: Kit, grouping: GroupWrites, plans: Mapping[str, PodGroupPlan], view: ClusterView
) -> BindReport:
    """Bind each planned pod, a gang of one each, to the first node, as the cycle does."""
    pods: dict[str, Pod] = {}
    groups: dict[str, PodGroup] = {}
    for key, plan in plans.items():
        group = parse_pod_group(plan.manifest, {})
        pods[key] = parse_pod(grouped_manifest(view.pods[key], plan), group.key)
        groups[group.key] = group
    bindings = [Binding(key, kit.nodes[0], Fraction(0), ()) for key in pods]
    return await kit.binder().bind(bindings, pods, groups, view.pods, {}, grouping.annotations)


def _single_plan(namespace: str, name: str) -> PodGroupPlan:
    manifest: PodGroupManifest = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": 1, "queue": QUEUE},
    }
    return PodGroupPlan(name, namespace, manifest, {"pod-group-name": name}, {})


GANG = ("worker-0", "worker-1", "worker-2")


async def _group_and_bind_gang(
    kit: Kit, min_member: int, also: Iterable[Mapping[str, Any]] = ()
) -> BindReport:
    """A cycle's grouping writes and binds for a new gang of sub-grouped pods (GANG), placed
    whole, and for pods `also` already grouped (each its own gang of one)."""
    manifests = {name: await kit.make_pod(name) for name in GANG}
    plan = _plan(kit.namespace, "gang", min_member)
    plans = {f"{kit.namespace}/{name}": plan for name in GANG}
    view = _view(kit, {**manifests, **{m["metadata"]["name"]: m for m in also}})
    group = parse_pod_group(plan.manifest, {})
    pods = {key: parse_pod(grouped_manifest(view.pods[key], plan), group.key) for key in plans}
    groups = {group.key: group}
    for manifest in also:
        pod, own = _single(manifest)
        pods[pod.key] = pod
        groups[own.key] = own
    bindings = [Binding(key, kit.nodes[0], Fraction(0), ()) for key in pods]
    async with GroupWrites(kit.kube, view, plans, 4, lambda *_: None) as grouping:
        grouping.decided(list(pods), {})
        report = await kit.binder().bind(
            bindings, pods, groups, view.pods, {}, grouping.annotations
        )
        await grouping.finish(report.bound.keys())
    return report


def _plan(namespace: str, name: str, min_member: int) -> PodGroupPlan:
    manifest: PodGroupManifest = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "minMember": min_member,
            "queue": QUEUE,
            "subGroups": [{"name": "workers", "minMember": min_member}],
        },
    }
    return PodGroupPlan(
        name, namespace, manifest, {"pod-group-name": name}, {SUBGROUP_LABEL: "workers"}
    )


def _view(kit: Kit, pods: Mapping[str, Mapping[str, Any]]) -> ClusterView:
    keyed = {f"{kit.namespace}/{name}": manifest for name, manifest in pods.items()}
    return ClusterView(
        nodes={}, pods=keyed, queues={}, pod_groups={}, priority_classes={}, kartas={}, revision=0
    )


@contextlib.asynccontextmanager
async def _refusing_subgroup_label(kit: Kit, pod: str) -> AsyncIterator[None]:
    """A ValidatingAdmissionPolicy (no webhook) that refuses `pod`'s sub-group label, and a
    probe pod it also refuses, which says when the policy is in force."""
    name = unique("refuse-subgroup")
    refused = [pod, f"{name}-probe"]
    expression = (
        f"!(object.metadata.name in {refused!r}) || !has(object.metadata.labels) || "
        f"!('{SUBGROUP_LABEL}' in object.metadata.labels)"
    ).replace("'", '"')
    namespaced = {"matchLabels": {"kubernetes.io/metadata.name": kit.namespace}}
    await kit.kube.create(
        POLICIES,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": namespaced,
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["pods"],
                        }
                    ],
                },
                "validations": [{"expression": expression, "message": "sub-group label refused"}],
            },
        },
    )
    try:
        await kit.kube.create(
            POLICY_BINDINGS,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": namespaced},
                },
            },
        )
        try:
            await kit.make_pod(f"{name}-probe")
            await wait_for("the admission policy to refuse the probe", _refuses(kit, name), 60)
            yield
        finally:
            await kit.kube.delete(f"{POLICY_BINDINGS}/{name}")
    finally:
        await kit.kube.delete(f"{POLICIES}/{name}")


def _refuses(kit: Kit, name: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            await kit.kube.merge_patch(
                kit.pod_path(f"{name}-probe"), {"metadata": {"labels": {SUBGROUP_LABEL: "x"}}}
            )
        except ApiError as error:
            if error.status in (400, 403, 422):
                return True
            raise
        # Not in force yet: take the label off again for the next try.
        await kit.kube.merge_patch(
            kit.pod_path(f"{name}-probe"), {"metadata": {"labels": {SUBGROUP_LABEL: None}}}
        )
        return False

    return check


@contextlib.asynccontextmanager
async def _running(cache: ClusterCache) -> AsyncIterator[None]:
    task = asyncio.create_task(cache.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _view_when(cache: ClusterCache, holds: Callable[[ClusterView], bool]) -> ClusterView:
    found: list[ClusterView] = []

    async def check() -> bool:
        view = cache.view()
        if holds(view):
            found.append(view)
            return True
        return False

    await wait_for("the watch cache to catch up", check, timeout=60)
    return found[0]


def _uid(view: ClusterView, kit: Kit, name: str) -> str | None:
    return (view.pods.get(f"{kit.namespace}/{name}", {}).get("metadata") or {}).get("uid")


def _node(view: ClusterView, kit: Kit, name: str) -> str | None:
    return (view.pods.get(f"{kit.namespace}/{name}", {}).get("spec") or {}).get("nodeName")
