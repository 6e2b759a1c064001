"""The status pass kept from pass to pass decides what a pass from nothing decides.

`KeptTotals` and the status writer's settled groups find what changed by identity, as
the live snapshot hands them objects: an object that did not change is the same
object. Over runs of random changes (pods arriving, binding, finishing and leaving,
PodGroups moving queue, nodes replaced, decisions changing, the cache catching up
with the writes or not, another writer resetting a status), the kept totals equal
those of a fresh `KeptTotals`, and a writer given the same objects, or also told which
decisions are new, sends exactly the patches of a writer given equal copies of
everything, for which nothing is ever the same object.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from types import MappingProxyType
from typing import Any, cast

from kai.engine.decision_changes import DecisionChanges
from kai.engine.group_decision import GroupDecision
from kai.engine.model import Node, Pod, PodGroup, PodPhase, Snapshot
from kai.kube.client import Kube
from kai.operator.after_binds import AfterBinds
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.snapshot import Assumed
from kai.operator.status import StatusWriter
from kai.operator.status_totals import KeptTotals
from tests.unit.engine.builders import group, node, pod, told

NOW = datetime(2026, 12, 1, tzinfo=UTC)
QUEUES = ("a", "b", "c")
STEPS = 40


class _RecordingKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Mapping[str, Any]]] = []

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> None:
        self.patches.append((path, patch))


@dataclasses.dataclass
class _Cluster:
    """What a live scheduler sees, changed a little at every step."""

    rng: random.Random
    nodes: list[Node]
    groups: dict[str, PodGroup] = dataclasses.field(default_factory=dict)
    manifests: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    pods: dict[str, Pod] = dataclasses.field(default_factory=dict)
    decisions: dict[str, GroupDecision] = dataclasses.field(default_factory=dict)
    made: int = 0
    decided: set[str] = dataclasses.field(default_factory=set)
    """The groups whose decision the last step made anew (the engine's account)."""

    def step(self) -> None:
        rng = self.rng
        self.decided = set()
        for _ in range(rng.randint(0, 4)):
            self._new_group()
        for key in rng.sample(sorted(self.groups), min(len(self.groups), rng.randint(0, 2))):
            self.made += 1  # a gang that grows: a pod joins a group that has some
            self._new_pod(self.groups[key].name, self.made)
        for key in rng.sample(sorted(self.pods), min(len(self.pods), rng.randint(0, 4))):
            self._change_pod(key)
        for key in rng.sample(sorted(self.groups), min(len(self.groups), rng.randint(0, 2))):
            found = self.groups[key]
            self.groups[key] = dataclasses.replace(
                found, queue=rng.choice(QUEUES), preemptible=rng.random() < 0.5
            )
        for key in rng.sample(sorted(self.groups), min(len(self.groups), rng.randint(0, 3))):
            waiting = rng.random() < 0.5
            queue = self.groups[key].queue
            reason = rng.choice(("NotEnoughResources", "OverLimit")) if waiting else None
            self.decisions[key] = GroupDecision(
                key, queue, not waiting, reason, f"{rng.randint(1, 3)} GPUs short" if reason else ""
            )
            self.decided.add(key)
        for key in rng.sample(sorted(self.manifests), min(len(self.manifests), rng.randint(0, 1))):
            # another writer resets its status (or it is made again under the same name)
            self.manifests[key] = {"metadata": self.manifests[key]["metadata"]}
        if rng.random() < 0.1:
            index = rng.randrange(len(self.nodes))
            self.nodes[index] = dataclasses.replace(
                self.nodes[index], gpu_memory_mib=rng.choice((40_000, 80_000))
            )

    def _new_group(self) -> None:
        rng = self.rng
        self.made += 1
        name = f"g{self.made}"
        found = group(name, rng.choice(QUEUES), preemptible=rng.random() < 0.5)
        self.groups[found.key] = found
        self.manifests[found.key] = {"metadata": {"namespace": "ns", "name": name}}
        for index in range(rng.choice((1, 1, 2, 3))):
            self._new_pod(name, index)

    def _new_pod(self, group_name: str, index: int) -> None:
        rng = self.rng
        shared = rng.random() < 0.3
        bound = rng.random() < 0.6
        made = pod(
            f"{group_name}-{index}",
            group_name,
            gpus=0 if shared else rng.choice((0, 1, 2)),
            cpu=rng.choice((100, 500, 2000)),
            portion=Fraction(rng.choice((1, 2, 3)), 4) if shared else Fraction(0),
            node_name=rng.choice(self.nodes).name if bound else None,
        )
        self.pods[made.key] = made

    def _change_pod(self, key: str) -> None:
        rng = self.rng
        found = self.pods[key]
        choice = rng.random()
        if choice < 0.3:
            del self.pods[key]
        elif found.node is None:
            self.pods[key] = dataclasses.replace(
                found, node=rng.choice(self.nodes).name, phase=PodPhase.BOUND
            )
        else:
            phase = rng.choice((PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.RELEASING))
            self.pods[key] = dataclasses.replace(found, phase=phase)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            tuple(self.nodes),
            tuple(self.pods[key] for key in sorted(self.pods)),
            tuple(self.groups[key] for key in sorted(self.groups)),
            (),
            NOW,
        )

    def view(self) -> ClusterView:
        empty: MappingProxyType[str, Any] = MappingProxyType({})
        queues = {name: {"metadata": {"name": name}} for name in QUEUES}
        return ClusterView(
            empty,
            empty,
            MappingProxyType(queues),
            MappingProxyType(dict(self.manifests)),
            empty,
            empty,
            1,
        )

    def catch_up(self, patches: list[tuple[str, Mapping[str, Any]]]) -> None:
        """The cache shows some of the status writes (new objects), and lags on the rest."""
        for path, patch in patches:
            parts = path.split("/")
            if "podgroups" not in parts or self.rng.random() < 0.3:
                continue
            key = f"{parts[-4]}/{parts[-2]}"
            if key in self.manifests:
                status = {k: v for k, v in patch["status"].items() if v is not None}
                self.manifests[key] = {**self.manifests[key], "status": status}


def _copied(snapshot: Snapshot) -> Snapshot:
    """Equal to `snapshot`, with no object in common."""
    return Snapshot(
        tuple(dataclasses.replace(item) for item in snapshot.nodes),
        tuple(dataclasses.replace(item) for item in snapshot.pods),
        tuple(dataclasses.replace(item) for item in snapshot.pod_groups),
        (),
        snapshot.now,
    )


def _copied_view(view: ClusterView) -> ClusterView:
    return dataclasses.replace(
        view,
        queues=MappingProxyType(copy.deepcopy(dict(view.queues))),
        pod_groups=MappingProxyType(copy.deepcopy(dict(view.pod_groups))),
    )


def test_kept_totals_equal_totals_summed_anew() -> None:
    for seed in range(20):
        cluster = _Cluster(random.Random(seed), [node(f"n{i}") for i in range(3)])
        kept = KeptTotals()
        for _ in range(STEPS):
            cluster.step()
            after = cluster.snapshot()
            kept.update(after)
            _assert_as_summed_anew(kept, after, seed)


def test_totals_told_what_changed_after_each_cycles_binds_equal_totals_summed_anew() -> None:
    """As the live loop feeds them: the engine's snapshot tells what changed since the one
    before, and the snapshot after the binds (`AfterBinds`) what changed since the one
    after the last binds; both accounts are exact."""
    told_any = 0
    for seed in range(20):
        rng = random.Random(seed)
        cluster = _Cluster(rng, [node(f"n{i}") for i in range(3)])
        kept, lineage = KeptTotals(), AfterBinds()
        decided: Snapshot | None = None
        after: Snapshot | None = None
        for _ in range(STEPS):
            cluster.step()
            now = cluster.snapshot()
            decided = now if decided is None else told(decided, now)
            pending = [p for p in decided.pods if p.phase is PodPhase.PENDING]
            bound = {
                p.key: Assumed(rng.choice(cluster.nodes).name, ())
                for p in rng.sample(pending, min(len(pending), rng.choice((0, 0, 1, 2))))
            }
            previous, after = after, lineage.snapshot(decided, bound)
            assert after.changes is not None
            if previous is not None and after.changes.pods is not None:
                assert after.changes.pods.since is previous.pods
                assert after.changes.pods.now is after.pods
                exact = told(previous, after).changes
                assert exact is not None and exact.pods is not None
                assert after.changes.pods.changed == exact.pods.changed
                told_any += 1
            kept.update(after)
            _assert_as_summed_anew(kept, after, seed)
    assert told_any > 500


def _assert_as_summed_anew(kept: KeptTotals, after: Snapshot, seed: int) -> None:
    fresh = KeptTotals()
    fresh.update(_copied(after))
    assert dict(kept.groups) == dict(fresh.groups), seed
    zero = {name for name, totals in kept.queues().items() if not _counts(totals)}
    assert {k: v for k, v in kept.queues().items() if k not in zero} == fresh.queues()


def _counts(totals: Any) -> bool:
    return any(
        getattr(getattr(totals, part), field)
        for part in ("allocated", "allocated_non_preemptible", "requested")
        for field in ("gpu", "cpu", "memory")
    )


def test_a_kept_status_pass_writes_what_a_pass_from_nothing_writes() -> None:
    """Three writers: one given the same objects, one also told which decisions are new
    (the engine's account, `DecisionChanges`; now and then of another mapping, when it
    reads all), and one given equal copies of everything."""
    told_any = 0
    for seed in range(20):
        rng = random.Random(seed)
        cluster = _Cluster(rng, [node(f"n{i}") for i in range(3)])
        kubes = [_RecordingKube() for _ in range(3)]
        kept, told, fresh = (
            StatusWriter(cast(Kube, k), EventRecorder(cast(Kube, k), "t"), 2) for k in kubes
        )
        wrote = 0
        last: dict[str, GroupDecision] | None = None
        for _ in range(STEPS):
            cluster.step()
            after, view = cluster.snapshot(), cluster.view()
            decisions = dict(cluster.decisions)
            asyncio.run(kept.publish(view, after, {}, decisions, NOW))
            since = last if rng.random() < 0.9 else dict(last or {})
            told_any += since is last
            account = DecisionChanges(since, frozenset(cluster.decided))
            asyncio.run(told.publish(view, after, {}, decisions, NOW, account))
            copies = {key: dataclasses.replace(found) for key, found in decisions.items()}
            asyncio.run(fresh.publish(_copied_view(view), _copied(after), {}, copies, NOW))
            assert kubes[0].patches == kubes[2].patches, seed
            # the same patches; in key order, not the decisions' (they go out concurrently)
            assert sorted(kubes[1].patches, key=str) == sorted(kubes[2].patches, key=str), seed
            wrote += len(kubes[0].patches)
            cluster.catch_up(kubes[0].patches)
            for kube in kubes:
                kube.patches.clear()
            last = decisions
        assert wrote > STEPS  # the runs write: there was something to get wrong
    assert told_any > 600
