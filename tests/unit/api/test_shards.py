"""The node-pool cut both `kai run --node-pool` and `kai simulate --node-pool` apply (KAI's rule)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kai.api.changes import StoreChanges
from kai.api.shards import KeptCut, Shard, Verdicts, shard_objects
from tests.unit.api.logged_store import LoggedStore, identity_diff

POOL = "kai.scheduler/node-pool"


def _meta(name: str, pool: str | None = None, **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **extra}
    if pool is not None:
        metadata["labels"] = {POOL: pool}
    return metadata


def _pod(
    name: str, pool: str | None = None, group: str | None = None, node: str | None = None
) -> dict[str, Any]:
    metadata = _meta(name, pool, namespace="ml")
    if group:
        metadata["annotations"] = {"pod-group-name": group}
    return {"kind": "Pod", "metadata": metadata, "spec": {"nodeName": node} if node else {}}


NODES = {"a-1": {"metadata": _meta("a-1", "a")}, "b-1": {"metadata": _meta("b-1", "b")},
         "d-1": {"metadata": _meta("d-1")}}  # fmt: skip
QUEUES = {"qa": {"metadata": _meta("qa", "a")}, "qd": {"metadata": _meta("qd")}}
GROUPS = {
    "ml/ga": {"metadata": _meta("ga", "a", namespace="ml")},
    "ml/gd": {"metadata": _meta("gd", namespace="ml")},
}
PODS = {
    "ml/ga-0": _pod("ga-0", group="ga"),  # no label of its own: its group's pool decides
    "ml/gd-0": _pod("gd-0", pool="a", group="gd"),  # the group wins over the pod's label
    "ml/new-a": _pod("new-a", pool="a"),  # not grouped yet: its label decides
    "ml/new-d": _pod("new-d"),
    "ml/lagging": _pod("lagging", pool="a", group="not-seen-yet"),
    "ml/on-a": _pod("on-a", node="a-1"),  # someone else's pod takes pool a's capacity
    "ml/on-b": _pod("on-b", pool="a", group="ga", node="b-1"),  # the node decides a bound pod
}


def test_a_pool_shard_sees_its_labelled_nodes_queues_groups_and_their_pods() -> None:
    cut = shard_objects(Shard("a"), NODES, QUEUES, GROUPS, PODS)
    assert set(cut.nodes) == {"a-1"}
    assert set(cut.queues) == {"qa"}
    assert set(cut.pod_groups) == {"ml/ga"}
    assert set(cut.pods) == {"ml/ga-0", "ml/new-a", "ml/lagging", "ml/on-a"}


def test_the_default_shard_sees_only_what_has_no_label() -> None:
    cut = shard_objects(Shard(), NODES, QUEUES, GROUPS, PODS)
    assert set(cut.nodes) == {"d-1"}
    assert set(cut.queues) == {"qd"}
    assert set(cut.pod_groups) == {"ml/gd"}
    assert set(cut.pods) == {"ml/gd-0", "ml/new-d"}


def test_no_object_is_in_two_shards_and_a_pool_without_objects_sees_nothing() -> None:
    shards = [Shard(), Shard("a"), Shard("b")]
    cuts = [shard_objects(s, NODES, QUEUES, GROUPS, PODS) for s in shards]
    for kind in ("nodes", "queues", "pod_groups", "pods"):
        seen = [key for cut in cuts for key in getattr(cut, kind)]
        assert len(seen) == len(set(seen)), kind
    empty = shard_objects(Shard("c"), NODES, QUEUES, GROUPS, PODS)
    assert (empty.nodes, empty.queues, empty.pod_groups, empty.pods) == ({}, {}, {}, {})


def test_an_empty_label_value_is_the_default_shard_and_the_key_is_configurable() -> None:
    assert Shard().owns({"metadata": {"labels": {POOL: ""}}})
    custom = Shard("x", label_key="example.com/pool")
    assert custom.owns({"metadata": {"labels": {"example.com/pool": "x"}}})
    assert not custom.owns({"metadata": {"labels": {POOL: "x"}}})


def test_each_shard_has_its_own_lease_and_name() -> None:
    assert Shard().lease_name("kai-scheduler") == "kai-scheduler"
    assert Shard("a").lease_name("kai-scheduler") == "kai-scheduler-a"
    assert (Shard().name, Shard("a").name) == ("default", "a")


def test_a_pool_shard_labels_the_pods_it_binds_with_its_pool_as_kai() -> None:
    """KAI's nodePoolLabelsChange: the pool under the configured key, unless already there."""
    assert Shard("a").labels_on_bind(_pod("p")) == {POOL: "a"}
    assert Shard("a").labels_on_bind(_pod("p", "b")) == {POOL: "a"}  # its group's pool wins
    assert Shard("a").labels_on_bind(_pod("p", "a")) == {}
    assert Shard("a", "example.com/pool").labels_on_bind(_pod("p", "a")) == {
        "example.com/pool": "a"
    }
    assert Shard().labels_on_bind(_pod("p")) == {}  # the default shard writes none
    assert Shard().labels_on_bind(_pod("p", "b")) == {}


def test_a_remembered_cut_is_the_cut_as_the_pods_nodes_and_groups_change() -> None:
    remembered = {shard: KeptCut() for shard in (Shard("a"), Shard())}
    pods = dict(PODS)
    groups = dict(GROUPS)
    nodes = dict(NODES)
    steps: list[Callable[[], object]] = [
        lambda: None,  # the same objects again
        lambda: pods.update({"ml/new-d": _pod("new-d", node="a-1")}),  # bound in pool a
        lambda: nodes.update({"a-1": {"metadata": _meta("a-1")}}),  # the node leaves pool a
        lambda: pods.update({"ml/late-0": _pod("late-0", pool="a", group="late")}),
        lambda: groups.update({"ml/late": {"metadata": _meta("late", namespace="ml")}}),
        lambda: nodes.update({"a-1": {"metadata": _meta("a-1", "a")}}),  # and comes back
        lambda: groups.update(
            {"ml/not-seen-yet": {"metadata": _meta("not-seen-yet", "b", namespace="ml")}}
        ),
        lambda: pods.update({"ml/ga-0": _pod("ga-0", group="gd")}),  # re-annotated
        lambda: groups.update({"ml/gd": {"metadata": _meta("gd", "a", namespace="ml")}}),  # moved
        lambda: groups.pop("ml/not-seen-yet"),
        lambda: pods.pop("ml/new-d"),
        lambda: groups.update({"ml/gd": {"metadata": _meta("gd", None, namespace="ml")}}),  # back
    ]
    for step in steps:
        step()
        for shard, verdicts in remembered.items():
            fresh = shard_objects(shard, nodes, QUEUES, groups, pods)
            assert shard_objects(shard, nodes, QUEUES, groups, pods, verdicts) == fresh


def test_an_object_is_judged_again_only_when_it_or_what_its_verdict_reads_changed() -> None:
    judged: list[str] = []

    def keep(pod: Mapping[str, Any]) -> bool:
        judged.append(pod["metadata"]["name"])
        return True

    def refers(pod: Mapping[str, Any]) -> str | None:
        return (pod["metadata"].get("annotations") or {}).get("pod-group-name")

    pods = {
        "ml/a": _pod("a", group="ga"),
        "ml/b": _pod("b", group="gd"),
        "ml/c": _pod("c"),  # reads nothing but itself
    }
    verdicts = Verdicts()
    verdicts.kept(pods, keep, refers)
    assert sorted(judged) == ["a", "b", "c"]
    judged.clear()
    pods["ml/new"] = _pod("new")  # a new object, as a watch event brings
    verdicts.kept(pods, keep, refers)
    assert judged == ["new"]
    judged.clear()
    verdicts.kept(pods, keep, refers, changed={"ga"})  # say, group ga came or left the shard
    assert judged == ["a"]
    judged.clear()
    del pods["ml/a"]
    verdicts.kept(pods, keep, refers, changed={"ga"})  # no pod reads ga any more
    assert judged == []


@pytest.mark.parametrize("seed", range(8))
def test_a_cut_of_logged_copies_is_the_cut_and_tells_its_readers_what_changed(seed: int) -> None:
    """As the live cache cuts it: copies that know what changed, a cut that says what
    changed in it, and readers of the cut (the snapshot, the grouper) told exactly that."""
    rng = random.Random(seed)
    pools = ("a", "b", None)
    nodes, groups, pods = LoggedStore(NODES), LoggedStore(GROUPS), LoggedStore(PODS)
    shards = (Shard("a"), Shard())
    remembered = {shard: KeptCut() for shard in shards}
    readers = {shard: (StoreChanges(), StoreChanges()) for shard in shards}
    last: dict[Shard, tuple[Mapping[str, Any], Mapping[str, Any]]] = {
        shard: ({}, {}) for shard in shards
    }
    for _ in range(150):
        for _ in range(rng.choice((0, 1, 1, 3))):
            roll = rng.random()
            if roll < 0.15:
                name = f"n{rng.randrange(4)}"
                nodes.put(name, {"metadata": _meta(name, rng.choice(pools))})
            elif roll < 0.35:
                name = f"g{rng.randrange(6)}"
                if rng.random() < 0.3:
                    groups.delete(f"ml/{name}")
                else:
                    group = {"metadata": _meta(name, rng.choice(pools), namespace="ml")}
                    groups.put(f"ml/{name}", group)
            else:
                name = f"p{rng.randrange(20)}"
                if rng.random() < 0.2:
                    pods.delete(f"ml/{name}")
                else:
                    group_name = rng.choice((None, f"g{rng.randrange(6)}"))
                    node = rng.choice((None, None, f"n{rng.randrange(4)}"))
                    pods.put(f"ml/{name}", _pod(name, rng.choice(pools), group_name, node))
        if rng.random() < 0.02:
            pods.relist()
        copies = nodes.copy(), groups.copy(), pods.copy()
        for shard in shards:
            cut = shard_objects(shard, copies[0], QUEUES, copies[1], copies[2], remembered[shard])
            fresh = shard_objects(shard, nodes.objects, QUEUES, groups.objects, pods.objects)
            assert cut == fresh
            for reader, before, after in zip(
                readers[shard], last[shard], (cut.pod_groups, cut.pods), strict=True
            ):
                changed, gone = reader.since_last(after)
                assert (set(changed), set(gone)) == identity_diff(before, after)
            last[shard] = (dict(cut.pod_groups), dict(cut.pods))
