"""The live snapshot is lenient: a bad object sets its own group aside and nothing else.

Also the watch cache's store semantics the scheduler relies on: a relist replaces
everything (objects deleted while the watch was down disappear), and the PodGroup
update keeps what KAI's grouper keeps.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig, PodPhase, SetAside, Topology, TopologyLevel
from kai.grouping import PodGroupPlan
from kai.kube.informer import Store
from kai.operator.cache import ClusterView
from kai.operator.group_writes import update_patch
from kai.operator.snapshot import INVALID_POD_GROUP, Assumed, Overlay, SnapshotBuilder
from tests.unit.api.volume_manifests import local_disk

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _node(name: str, gpus: int) -> dict[str, Any]:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                     "labels": {"nvidia.com/gpu.memory": "40960"}},
        "status": {"allocatable": resources, "capacity": resources,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


def _queue(name: str) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
    }


def _group(name: str, min_member: object) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
        },
        "spec": {"queue": "q", "minMember": min_member},
    }


def _pod(name: str, group: str, gpus: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "resourceVersion": "1",
                     "annotations": {"pod-group-name": group}},
        "spec": {"schedulerName": "kai-scheduler",
                 "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                                                             "limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _view(**objects: dict[str, dict[str, Any]]) -> ClusterView:
    def of(kind: str) -> MappingProxyType[str, dict[str, Any]]:
        return MappingProxyType(objects.get(kind, {}))

    return ClusterView(
        of("nodes"),
        of("pods"),
        of("queues"),
        of("pod_groups"),
        of("priority_classes"),
        of("kartas"),
        1,
        of("topologies"),
    )


def _topology(name: str, *labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


def test_topologies_reach_the_snapshot_and_a_bad_one_is_left_out() -> None:
    zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
    view = _view(
        nodes={"n1": _node("n1", 2)},
        queues={"q": _queue("q")},
        pod_groups={"team/good": _group("good", 1)},
        pods={"team/a": _pod("a", "good")},
        topologies={"racks": _topology("racks", zone, host), "bad": _topology("bad", host, zone)},
    )
    builder = SnapshotBuilder("kai-resource-reservation")
    snapshot = builder.build(view, Overlay(), NOW)
    assert snapshot.topologies == (Topology("racks", (TopologyLevel(zone), TopologyLevel(host))),)
    assert builder.problems_remembered == 1
    assert [group.name for group in snapshot.pod_groups] == ["good"]


def test_invalid_pod_group_is_set_aside_and_the_rest_is_scheduled() -> None:
    view = _view(
        nodes={"n1": _node("n1", 2)},
        queues={"q": _queue("q")},
        pod_groups={"team/good": _group("good", 1), "team/bad": _group("bad", "many")},
        pods={"team/a": _pod("a", "good"), "team/b": _pod("b", "bad")},
    )
    snapshot = SnapshotBuilder("kai-resource-reservation").build(view, Overlay(), NOW)
    assert [g.key for g in snapshot.pod_groups] == ["team/good"]
    (aside,) = snapshot.set_aside
    assert (aside.group, aside.reason) == ("team/bad", INVALID_POD_GROUP)
    assert "spec.minMember" in aside.message

    result = run_cycle(snapshot, EngineConfig(time_limit_seconds=0))
    assert [b.pod for b in result.bindings] == ["team/a"]
    assert result.groups["team/bad"].reason == INVALID_POD_GROUP
    assert not result.groups["team/bad"].scheduled


def test_assumed_binds_hold_capacity_until_the_watch_shows_them() -> None:
    view = _view(
        nodes={"n1": _node("n1", 1)},
        queues={"q": _queue("q")},
        pod_groups={"team/g1": _group("g1", 1), "team/g2": _group("g2", 1)},
        pods={"team/a": _pod("a", "g1"), "team/b": _pod("b", "g2")},
    )
    overlay = Overlay(assumed={"team/a": Assumed("n1", ())})
    snapshot = SnapshotBuilder("kai-resource-reservation").build(view, overlay, NOW)
    placed = {p.key: (p.phase, p.node) for p in snapshot.pods}
    assert placed["team/a"] == (PodPhase.BOUND, "n1")
    # The only GPU is taken by the bind the cache does not show yet: b must wait.
    assert run_cycle(snapshot, EngineConfig(time_limit_seconds=0)).bindings == ()


def test_a_pod_waiting_for_the_pod_grouper_is_not_read_until_it_is_planned() -> None:
    """Unbound and ungrouped, it holds nothing and is in no queue: a burst's first cycle
    read 4,500 of them before its first bind. Even a malformed one is no problem yet."""
    ungrouped = _pod("waiting", "")
    del ungrouped["metadata"]["annotations"]
    ungrouped["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "lots"
    elsewhere = _pod("other-scheduler", "")  # bound by another scheduler: it holds a GPU
    del elsewhere["metadata"]["annotations"]
    elsewhere["spec"] |= {"schedulerName": "default-scheduler", "nodeName": "n1"}
    view = _view(
        nodes={"n1": _node("n1", 2)},
        queues={"q": _queue("q")},
        pods={"team/waiting": ungrouped, "team/other-scheduler": elsewhere},
    )
    builder = SnapshotBuilder("kai-resource-reservation")
    snapshot = builder.build(view, Overlay(), NOW)
    assert [pod.key for pod in snapshot.pods] == ["team/other-scheduler"]
    assert builder.problems_remembered == 0

    plan = PodGroupPlan("pg-waiting", "team", _group("pg-waiting", 1), {}, {})
    planned = builder.build(view, Overlay(plans={"team/waiting": plan}), NOW)
    assert planned.set_aside[0].group == "team/pg-waiting"  # now read, and found unreadable


def test_relist_replaces_the_store() -> None:
    store = Store()
    store.replace([_pod("a", "g"), _pod("b", "g")], "10")
    store.apply({"type": "DELETED", "object": _pod("a", "g")})
    assert set(store.objects) == {"team/b"}
    store.replace([_pod("c", "g")], "20")  # b was deleted while the watch was down
    assert set(store.objects) == {"team/c"}
    assert store.version == "20"
    assert not store.apply({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "21"}}})
    assert store.version == "21"


def test_update_keeps_what_users_may_have_changed() -> None:
    plan_manifest = {
        "metadata": {"name": "pg", "namespace": "team", "labels": {"app": "x"}, "annotations": {}},
        "spec": {"queue": "default-queue", "minMember": 4, "priorityClassName": "train"},
    }
    plan = PodGroupPlan("pg", "team", plan_manifest, {}, {})
    existing: dict[str, Any] = {
        "metadata": {"labels": {"app": "x", "kai.scheduler/queue": "moved"}},
        "spec": {
            "queue": "moved",
            "minMember": 2,
            "priorityClassName": "train",
            "markUnschedulable": True,
        },
    }
    patch = update_patch(existing, plan)
    assert patch is not None
    assert patch["spec"]["queue"] == "moved"
    assert patch["spec"]["minMember"] == 4
    assert patch["spec"]["markUnschedulable"] is True
    assert patch["metadata"]["labels"]["kai.scheduler/queue"] == "moved"
    current = {"metadata": existing["metadata"], "spec": {**existing["spec"], "minMember": 4}}
    assert update_patch(current, plan) is None  # nothing to write


def test_update_keeps_the_node_pool_under_the_configured_label() -> None:
    """KAI's PodGroupHandler preserves the pool under its nodePoolLabelKey."""
    key = "example.com/pool"
    plan_manifest: dict[str, Any] = {
        "metadata": {"name": "pg", "namespace": "team", "labels": {key: "a"}, "annotations": {}},
        "spec": {"queue": "q", "minMember": 1, "priorityClassName": "train"},
    }
    plan = PodGroupPlan("pg", "team", plan_manifest, {}, {})
    existing = {"metadata": {"labels": {key: "moved"}}, "spec": dict(plan_manifest["spec"])}
    assert update_patch(existing, plan, key) is None  # the moved pool is kept: nothing to write
    patch = update_patch(existing, plan)  # the default key preserves another label
    assert patch is not None
    assert patch["metadata"]["labels"][key] == "a"


def test_a_group_in_bind_backoff_still_counts_its_running_pods_toward_its_queue() -> None:
    # Queue limit 4 GPUs; gang g1 runs 4 GPUs and is in bind backoff (one of its pods failed
    # to bind); gang g2 asks for 4 more. Dropping g1 from the snapshot dropped its running
    # pods from the queue's accounting, and g2 was bound: 8 GPUs under a limit of 4.
    queue = _queue("q")
    queue["spec"]["resources"]["gpu"] = {"quota": 0, "limit": 4, "overQuotaWeight": 1}
    running = [_pod(f"r{i}", "g1") for i in range(4)]
    for pod in running:
        pod["spec"]["nodeName"] = "n1"
        pod["status"]["phase"] = "Running"
    view = _view(
        nodes={"n1": _node("n1", 8)},
        queues={"q": queue},
        pod_groups={"team/g1": _group("g1", 4), "team/g2": _group("g2", 4)},
        pods={
            **{f"team/r{i}": pod for i, pod in enumerate(running)},
            "team/extra": _pod("extra", "g1"),
            **{f"team/n{i}": _pod(f"n{i}", "g2") for i in range(4)},
        },
    )
    held = SetAside("team/g1", "q", "BindFailed", "binding keeps failing; retrying later")
    snapshot = SnapshotBuilder("kai-resource-reservation").build(
        view, Overlay(held={"team/g1": held}), NOW
    )
    result = run_cycle(snapshot, EngineConfig(time_limit_seconds=0))
    assert result.bindings == ()
    assert "team/extra" not in {p.key for p in snapshot.pods}  # the held group places nothing
    assert result.groups["team/g2"].reason == "OverLimit"
    assert result.groups["team/g1"].reason == "BindFailed"
    assert result.queues["q"].allocated.gpu == 4


def test_a_problem_gone_from_the_cluster_is_forgotten() -> None:
    builder = SnapshotBuilder("kai-resource-reservation")
    good = {"q": _queue("q")}
    for i in range(5):  # five bad queues in turn, each its own problem
        bad = _queue(f"bad-{i}")
        bad["spec"]["resources"]["gpu"] = {"quota": "many"}
        builder.build(_view(queues={**good, f"bad-{i}": bad}), Overlay(), NOW)
    assert builder.problems_remembered == 1  # only the problem still in the cluster
    builder.build(_view(queues=good), Overlay(), NOW)
    assert builder.problems_remembered == 0


def test_a_heartbeat_alone_is_no_change() -> None:
    def node(version: str, heartbeat: str, ready: str) -> dict[str, Any]:
        condition = {"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat}
        return {
            "metadata": {"name": "n", "resourceVersion": version},
            "status": {"conditions": [condition]},
        }

    store = Store()
    assert store.apply({"type": "ADDED", "object": node("1", "10:00", "True")})
    assert not store.apply({"type": "MODIFIED", "object": node("2", "10:05", "True")})
    assert store.objects["n"]["metadata"]["resourceVersion"] == "2"  # kept all the same
    assert store.apply({"type": "MODIFIED", "object": node("3", "10:10", "False")})


def _priority_class(name: str, value: object, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version},
        "value": value,
    }


def test_priority_classes_are_parsed_once_per_version_and_a_bad_one_stays_reported() -> None:
    builder = SnapshotBuilder("kai-resource-reservation")
    bad = _priority_class("broken", "high", "1")
    for _ in range(2):  # kept from the first cycle: the same values, the problem still known
        view = _view(priority_classes={"train": _priority_class("train", 70, "1"), "broken": bad})
        assert builder.priority_classes(view)["train"] == 70
        assert "broken" not in builder.priority_classes(view)
        builder.build(view, Overlay(), NOW)
        assert builder.problems_remembered == 1
    view = _view(priority_classes={"train": _priority_class("train", 90, "2")})
    assert builder.priority_classes(view)["train"] == 90  # a new version is read again
    builder.build(view, Overlay(), NOW)
    assert builder.problems_remembered == 0


def test_a_claim_takes_a_local_volume_and_a_broken_volume_is_reported() -> None:
    """The live builder lays each node's free volumes made beforehand on it, the claim's
    pod asks for one and is bound there; a volume it cannot read is left out and reported
    once. Once the volume names another claim, the node offers none and the pod waits."""
    node = _node("n1", 2)
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "n1"
    pod = _pod("a", "good")
    pod["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    local = {
        "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    claim = {
        "metadata": {"name": "data", "namespace": "team"},
        "spec": {"storageClassName": "local", "resources": {"requests": {"storage": "5Gi"}}},
    }
    disk = local_disk("disk", "n1", "10Gi")
    broken = local_disk("broken", "n1", "lots")
    objects = {
        "nodes": {"n1": node},
        "queues": {"q": _queue("q")},
        "pod_groups": {"team/good": _group("good", 1)},
        "pods": {"team/a": pod},
    }
    builder = SnapshotBuilder("kai-resource-reservation")

    def view(*volumes: dict[str, Any]) -> ClusterView:
        return dataclasses.replace(
            _view(**objects),
            claims=MappingProxyType({"team/data": claim}),
            volumes=MappingProxyType({v["metadata"]["name"]: v for v in volumes}),
            storage_classes=MappingProxyType({"local": local}),
        )

    snapshot = builder.build(view(disk, broken), Overlay(), NOW)
    assert dict(snapshot.nodes[0].scalars)["volume/local/Filesystem/10Gi+"] == 1000
    assert builder.problems_remembered == 1
    result = run_cycle(snapshot, EngineConfig())
    assert [(b.pod, b.node) for b in result.bindings] == [("team/a", "n1")]
    taken = local_disk("disk", "n1", "10Gi", claimRef={"namespace": "team", "name": "other"})
    later = builder.build(view(taken), Overlay(), NOW)
    assert later.nodes[0].scalars == ()
    told = later.changes.nodes if later.changes is not None else None
    assert told is not None and "n1" in told.changed  # the node offers another
    waiting = run_cycle(later, EngineConfig())
    assert waiting.bindings == ()
    assert "no volume of StorageClass local (Filesystem)" in waiting.groups["team/good"].message
