"""Queue and PodGroup status as KAI's queue and pod-group controllers write them.

KAI's sources: pkg/queuecontroller/controllers/{childqueues_updater,resource_updater},
pkg/podgroupcontroller/controllers/metadata/pod.go, pkg/apis/scheduling/v2/queue_types.go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from types import MappingProxyType
from typing import Any, cast

from kai.engine.fairshare import QueueShare
from kai.engine.model import PodPhase, Snapshot
from kai.engine.resources import Resources
from kai.kube.client import Kube
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.status import StatusWriter, queue_statuses
from kai.operator.status_totals import KeptTotals, StatusTotals, resource_list
from tests.unit.engine.builders import GI, group, node, pod

NOW = datetime(2026, 12, 1, tzinfo=UTC)
GPU = "nvidia.com/gpu"


def _queue(
    name: str, parent: str | None = None, status: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"resources": {}},
    }
    if parent:
        manifest["spec"]["parentQueue"] = parent
    if status is not None:
        manifest["status"] = dict(status)
    return manifest


def _share(gpus: int) -> QueueShare:
    amount = Resources.of(gpus)
    return QueueShare(amount, amount, amount, Resources(), amount, Resources.of(-1))


def _gpus(allocated: int, requested: int, non_preemptible: int = 0) -> dict[str, Any]:
    """A status's three totals for whole GPUs only (no CPU or memory)."""
    return StatusTotals(
        Resources.of(allocated), Resources.of(non_preemptible), Resources.of(requested)
    ).resources_status()


# A three-level tree: root -> (research, ops); research -> (vision, nlp); ops -> (infra).
TREE = [
    _queue("root"),
    _queue("research", "root"),
    _queue("ops", "root"),
    _queue("vision", "research"),
    _queue("nlp", "research"),
    _queue("infra", "ops"),
]


def test_child_queues_and_totals_of_a_three_level_tree() -> None:
    own = {  # each queue's own totals: its PodGroups'
        "vision": StatusTotals(Resources.of(2), Resources(), Resources.of(3)),
        "nlp": StatusTotals(Resources.of(1), Resources.of(1), Resources.of(1)),
        "infra": StatusTotals(Resources.of(4), Resources(), Resources.of(4)),
    }
    shares = {name: _share(1) for name in ("root", "research", "vision")}

    statuses = queue_statuses(TREE, own, shares)

    # Children in name order; a queue with none has no childQueues (KAI's omitempty).
    assert {name: status["childQueues"] for name, status in statuses.items()} == {
        "root": ["ops", "research"],
        "research": ["nlp", "vision"],
        "ops": ["infra"],
        "vision": None,
        "nlp": None,
        "infra": None,
    }
    fair = resource_list(Resources.of(1))
    assert statuses["root"] == {
        **_gpus(allocated=7, requested=8, non_preemptible=1),
        "childQueues": ["ops", "research"],
        "fairShare": fair,
        "deserved": fair,
    }
    assert statuses["research"] == {
        **_gpus(allocated=3, requested=4, non_preemptible=1),
        "childQueues": ["nlp", "vision"],
        "fairShare": fair,
        "deserved": fair,
    }
    # Not in the engine's division (no share): KAI's fields all the same, no fair share.
    assert statuses["ops"] == {
        **_gpus(allocated=4, requested=4),
        "childQueues": ["infra"],
        "fairShare": None,
        "deserved": None,
    }
    assert statuses["nlp"] == {
        **_gpus(allocated=1, requested=1, non_preemptible=1),
        "childQueues": None,
        "fairShare": None,
        "deserved": None,
    }


def test_an_orphan_queue_gets_its_status_and_its_missing_parent_nothing() -> None:
    queues = [_queue("orphan", "gone"), _queue("kid", "orphan")]
    statuses = queue_statuses(
        queues, {"kid": StatusTotals(Resources.of(1), Resources(), Resources.of(2))}, {}
    )
    assert set(statuses) == {"orphan", "kid"}
    assert statuses["orphan"]["childQueues"] == ["kid"]
    assert statuses["orphan"]["allocated"][GPU] == "1"
    assert statuses["orphan"]["requested"][GPU] == "2"


def test_a_parent_cycle_counts_each_queue_once() -> None:
    queues = [_queue("a", "b"), _queue("b", "a")]
    statuses = queue_statuses(
        queues, {"a": StatusTotals(Resources.of(1), Resources(), Resources.of(1))}, {}
    )
    assert statuses["a"]["allocated"][GPU] == "1"
    assert statuses["b"]["allocated"][GPU] == "1"
    assert statuses["a"]["childQueues"] == ["b"]


def test_group_totals_count_pods_as_kais_pod_group_controller_does() -> None:
    def cpu(millis: int) -> Resources:
        return Resources.of(0, millis, GI)

    pods = [
        pod("running", "np", cpu=100, node_name="n1"),
        pod("waiting", "np", cpu=200),
        pod("gated", "np", cpu=400, phase=PodPhase.GATED),
        # Being deleted, still running on its node: KAI's phase is Running, so it counts.
        pod("leaving", "np", cpu=800, node_name="n1", phase=PodPhase.RELEASING),
        # Being deleted before it was bound: phase Pending, requested only.
        pod("dropped", "np", cpu=1600, phase=PodPhase.RELEASING),
        pod("done", "np", cpu=3200, node_name="n1", phase=PodPhase.SUCCEEDED),
        pod("failed", "np", cpu=6400, node_name="n1", phase=PodPhase.FAILED),
        pod("train", "pre", gpus=2, cpu=100, node_name="n1"),
        pod("half", "pre", portion=Fraction(1, 2), cpu=100, node_name="n1"),
        # Groups of one pod (every plain pod's) are counted the same.
        pod("alone-np", "one-np", gpus=1, cpu=100, node_name="n1"),
        pod("alone-share", "one-pre", portion=Fraction(1, 4), cpu=100, node_name="n1"),
        pod("alone-waiting", "one-waiting", cpu=300),
        pod("alone-done", "one-done", cpu=300, node_name="n1", phase=PodPhase.SUCCEEDED),
    ]
    groups = (
        group("np", "q", preemptible=False),
        group("pre", "q"),
        group("one-np", "q", preemptible=False),
        *(group(name, "q") for name in ("one-pre", "one-waiting", "one-done")),
    )
    after = Snapshot((node("n1"),), tuple(pods), groups, (), NOW)
    kept = KeptTotals()
    kept.update(after)
    totals = kept.groups
    one_gpu = Resources(Fraction(1), Fraction(100), Fraction(GI))
    assert totals["ns/one-np"] == StatusTotals(one_gpu, one_gpu, one_gpu)
    share = Resources(Fraction(1, 4), Fraction(100), Fraction(GI))
    assert totals["ns/one-pre"] == StatusTotals(share, Resources(), share)
    assert totals["ns/one-waiting"] == StatusTotals(Resources(), Resources(), cpu(300))
    assert "ns/one-done" not in totals
    allocated = cpu(100) + cpu(800)
    assert totals["ns/np"] == StatusTotals(
        allocated, allocated, cpu(100) + cpu(200) + cpu(400) + cpu(800) + cpu(1600)
    )
    train = Resources(Fraction(5, 2), Fraction(200), Fraction(2 * GI))
    assert totals["ns/pre"] == StatusTotals(train, Resources(), train)


def test_memory_is_written_exactly() -> None:
    assert resource_list(Resources.of(0, 0, 3 * 10**9))["memory"] == "3000M"
    assert resource_list(Resources.of(0, 0, 2 * GI))["memory"] == "2147483648"
    assert resource_list(Resources.of(Fraction(1, 4), 1500, 0)) == {
        GPU: "0.25",
        "cpu": "1500m",
        "memory": "0M",
    }


class _RecordingKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Mapping[str, Any]]] = []

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> None:
        self.patches.append((path, patch))


def _view(queues: list[dict[str, Any]]) -> ClusterView:
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    by_name = MappingProxyType({q["metadata"]["name"]: q for q in queues})
    return ClusterView(empty, empty, by_name, empty, empty, empty, 1)


def _writer() -> tuple[StatusWriter, _RecordingKube]:
    fake = _RecordingKube()
    kube = cast(Kube, fake)
    return StatusWriter(kube, EventRecorder(kube, "test"), concurrency=2), fake


def _written(fake: _RecordingKube) -> dict[str, Mapping[str, Any]]:
    return {path.split("/")[-2]: patch["status"] for path, patch in fake.patches}


EMPTY = Snapshot((), (), (), (), NOW)


def test_queue_status_is_written_once_and_not_again_while_nothing_changes() -> None:
    writer, fake = _writer()
    asyncio.run(writer.publish(_view(TREE), EMPTY, {}, {}, NOW))
    first = _written(fake)
    assert set(first) == {q["metadata"]["name"] for q in TREE}
    assert first["root"]["childQueues"] == ["ops", "research"]
    assert "conditions" not in first["root"]  # KAI's queue controller writes none

    # The cache shows what was written: neither this writer nor a new one (another
    # leader, which remembers no writes) sends it again.
    caught_up = _view(
        [
            _queue(name, q["spec"].get("parentQueue"), _without_nulls(first[name]))
            for q in TREE
            for name in [q["metadata"]["name"]]
        ]
    )
    fake.patches.clear()
    asyncio.run(writer.publish(caught_up, EMPTY, {}, {}, NOW))
    assert fake.patches == []
    writer, fake = _writer()
    asyncio.run(writer.publish(caught_up, EMPTY, {}, {}, NOW))
    assert fake.patches == []


def _without_nulls(status: Mapping[str, Any]) -> dict[str, Any]:
    """What the API server stores for a merge patch: a null removes the field."""
    return {field: value for field, value in status.items() if value is not None}


def test_a_condition_another_writer_set_is_left_as_it_is() -> None:
    condition = {
        "type": "OverQuota",
        "status": "True",
        "reason": "Example",
        "message": "set by someone else",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    shown = _without_nulls(queue_statuses([_queue("solo")], {}, {})["solo"])
    writer, fake = _writer()
    asyncio.run(
        writer.publish(
            _view([_queue("solo", status={**shown, "conditions": [condition]})]),
            EMPTY,
            {},
            {},
            NOW,
        )
    )
    assert fake.patches == []  # nothing of kai's changed: the condition is no reason to write

    asyncio.run(
        writer.publish(
            _view([_queue("solo", status={"conditions": [condition]})]), EMPTY, {}, {}, NOW
        )
    )
    (status,) = _written(fake).values()
    assert "conditions" not in status  # a merge patch without it keeps it, and its time


def test_the_last_child_leaving_removes_child_queues() -> None:
    writer, fake = _writer()
    asyncio.run(writer.publish(_view([_queue("p"), _queue("c", "p")]), EMPTY, {}, {}, NOW))
    assert _written(fake)["p"]["childQueues"] == ["c"]
    fake.patches.clear()
    shown = {"childQueues": ["c"], **_gpus(0, 0)}
    asyncio.run(writer.publish(_view([_queue("p", status=shown)]), EMPTY, {}, {}, NOW))
    assert _written(fake) == {
        "p": {**_gpus(0, 0), "childQueues": None, "fairShare": None, "deserved": None}
    }


def test_fair_share_pruned_by_kais_crd_is_not_written_every_cycle() -> None:
    writer, fake = _writer()
    shares = {"solo": _share(2)}
    asyncio.run(writer.publish(_view([_queue("solo")]), EMPTY, shares, {}, NOW))
    assert _written(fake)["solo"]["fairShare"] == resource_list(Resources.of(2))
    fake.patches.clear()
    # KAI's CRD does not declare fairShare or deserved: the server dropped them.
    pruned = {**_gpus(0, 0)}
    asyncio.run(writer.publish(_view([_queue("solo", status=pruned)]), EMPTY, shares, {}, NOW))
    assert fake.patches == []
    # A changed fair share is still written.
    asyncio.run(
        writer.publish(_view([_queue("solo", status=pruned)]), EMPTY, {"solo": _share(3)}, {}, NOW)
    )
    assert _written(fake)["solo"]["fairShare"] == resource_list(Resources.of(3))
