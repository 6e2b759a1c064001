"""The grouper reads again only the pods that changed, and plans what it would plan reading all.

`PodGrouper.plan` keeps, per pod, whether it may need a group, and reads again only the
pods that are not the very objects of the last cycle (a watch cache replaces an object
that changes). Over runs of random changes (pods created with and without the
annotation, bound, finished, deleted, marked for deletion; PodGroups created and
deleted), a grouper given the cache's objects, in copies that say which keys changed
as the live cache's do, plans exactly what a grouper given equal copies of everything
plans, for which every pod is new every cycle.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kai.api.constants import default_priority_classes
from kai.kube.owners import OwnerReader
from kai.operator.cache import ClusterView
from kai.operator.events import EventRecorder
from kai.operator.pod_grouper import PodGrouper
from tests.unit.api.logged_store import LoggedDict

RESERVATIONS = "kai-res"


def _pod(name: str, namespace: str, scheduler: str, named: str | None) -> dict[str, Any]:
    annotations = {"pod-group-name": named} if named else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "resourceVersion": "1", "labels": {"kai.scheduler/queue": "q"},
                     "annotations": annotations},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _grouper() -> PodGrouper:
    return PodGrouper(None, OwnerReader(None), EventRecorder(None, "t"), RESERVATIONS, 4)  # type: ignore[arg-type]


def _view(pods: Mapping[str, Any], groups: Mapping[str, Any]) -> ClusterView:
    empty: MappingProxyType[str, Any] = MappingProxyType({})
    return ClusterView(empty, pods, empty, groups, empty, empty, 1)


def _step(rng: random.Random, pods: dict[str, Any], groups: dict[str, Any], made: int) -> None:
    for index in range(rng.randint(0, 3)):
        name = f"p{made}-{index}"
        namespace = RESERVATIONS if rng.random() < 0.1 else "ns"
        scheduler = "kai-scheduler" if rng.random() < 0.9 else "default-scheduler"
        # Named after its own plan's group (KAI's pg-<owner>-<uid>), or another one.
        named = rng.choice((None, None, f"pg-{name}-uid-{name}", "elsewhere"))
        pods[f"{namespace}/{name}"] = _pod(name, namespace, scheduler, named)
        if named and rng.random() < 0.5:
            groups[f"ns/{named}"] = {"metadata": {"name": named, "namespace": "ns"}}
    for key in rng.sample(sorted(pods), min(len(pods), rng.randint(0, 3))):
        choice = rng.random()
        if choice < 0.25:
            del pods[key]
            continue
        changed = copy.deepcopy(pods[key])
        if choice < 0.6:
            changed["spec"]["nodeName"] = "n1"
            changed["status"]["phase"] = "Running"
        elif choice < 0.75:
            changed["status"]["phase"] = rng.choice(("Succeeded", "Failed"))
        elif choice < 0.9:
            changed["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        else:
            changed["metadata"]["annotations"]["pod-group-name"] = "late"
        pods[key] = changed
    for key in rng.sample(sorted(groups), min(len(groups), rng.randint(0, 1))):
        del groups[key]


async def test_a_grouper_reading_changes_plans_what_one_reading_everything_plans() -> None:
    classes = default_priority_classes()
    planned = 0
    for seed in range(25):
        rng = random.Random(seed)
        pods, groups = LoggedDict(), LoggedDict()
        kept, fresh = _grouper(), _grouper()
        for made in range(30):
            _step(rng, pods, groups, made)
            if rng.random() < 0.05:
                pods.store.relist()
            view = _view(pods.store.copy(), groups.store.copy())  # as the live cache's
            found = await kept.plan(view, classes)
            copies = _view(
                MappingProxyType(copy.deepcopy(dict(pods))),
                MappingProxyType(copy.deepcopy(dict(groups))),
            )
            again = await fresh.plan(copies, classes)
            assert found.new.keys() == again.new.keys(), seed
            assert found.new == again.new, seed
            planned += len(found.new)
    assert planned > 100  # the runs plan: there was something to get wrong
