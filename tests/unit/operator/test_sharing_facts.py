"""The GPU-sharing facts kept from cycle to cycle are the facts read anew from every pod.

`SharingFacts` reads only the pods that are not the very objects it read last cycle
(`StoreChanges`): a watch cache replaces an object that changes. By hand, what each fact
means; over runs of random changes, a kept instance equals a new one.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from kai.api.changes import StoreChanges
from kai.operator.gpu_sharing import CONFIGMAP_ANNOTATION, PUBLISHED_ANNOTATION
from kai.operator.sharing_facts import SharingFacts

RESERVATIONS = "kai-resource-reservation"


def _pod(
    name: str,
    namespace: str = "team",
    node: str | None = "n1",
    devices: tuple[str, ...] = (),
    phase: str = "Running",
    published: bool = False,
    configmap: bool = True,
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if devices:
        labels["runai-gpu-group"] = devices[0]
        labels.update({f"runai-gpu-group/{device}": device for device in devices[1:]})
    annotations: dict[str, str] = {}
    if configmap:
        annotations[CONFIGMAP_ANNOTATION] = f"{name}-shared-gpu"
    if published:
        annotations[PUBLISHED_ANNOTATION] = "true"
    spec: dict[str, Any] = {"nodeName": node} if node else {}
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": annotations},
        "spec": spec,
        "status": {"phase": phase},
    }  # fmt: skip


def test_what_each_fact_means() -> None:
    pods = {
        f"{RESERVATIONS}/r1": _pod("r1", RESERVATIONS, devices=("d1",), configmap=False),
        f"{RESERVATIONS}/other": _pod("other", RESERVATIONS, configmap=False),  # no device
        "team/two": _pod("two", devices=("d1", "d2")),
        "team/done": _pod("done", devices=("d3",), phase="Succeeded"),
        "team/pending": _pod("pending", node=None, devices=("d4",)),
        "team/published": _pod("published", devices=("d5",), published=True),
        "team/whole": _pod("whole"),
    }
    facts = SharingFacts(RESERVATIONS)
    facts.update(pods)
    assert set(facts.reservations) == {f"{RESERVATIONS}/r1"}
    assert facts.in_use == {"d1", "d2", "d5"}  # a finished pod or one on no node holds none
    assert set(facts.waiting) == {"team/two", "team/done"}


def test_store_changes_are_new_replaced_and_gone_objects() -> None:
    changes = StoreChanges()
    first = {"a": {"v": 1}, "b": {"v": 1}}
    assert sorted(changes.since_last(first)[0]) == ["a", "b"]
    second = {"a": first["a"], "b": {"v": 1}, "c": {"v": 1}}  # b equal, but a new object
    changed, gone = changes.since_last(second)
    assert (sorted(changed), gone) == (["b", "c"], [])
    changed, gone = changes.since_last({"a": first["a"]})
    assert (changed, sorted(gone)) == ([], ["b", "c"])


def test_kept_facts_are_the_facts_read_anew() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        pods: dict[str, dict[str, Any]] = {}
        kept = SharingFacts(RESERVATIONS)
        for step in range(40):
            for _ in range(rng.randint(0, 3)):
                name = f"p{step}-{rng.randrange(10**6)}"
                reservation = rng.random() < 0.2
                devices = tuple(f"d{rng.randrange(6)}" for _ in range(rng.choice((0, 1, 1, 2))))
                namespace = RESERVATIONS if reservation else "team"
                pods[f"{namespace}/{name}"] = _pod(
                    name, namespace, rng.choice(("n1", None)), devices,
                    rng.choice(("Running", "Pending", "Failed")),
                    rng.random() < 0.3, rng.random() < 0.8,
                )  # fmt: skip
            for key in rng.sample(sorted(pods), min(len(pods), rng.randint(0, 3))):
                if rng.random() < 0.4:
                    del pods[key]
                else:
                    changed = copy.deepcopy(pods[key])
                    changed["metadata"]["annotations"][PUBLISHED_ANNOTATION] = "true"
                    changed["status"]["phase"] = rng.choice(("Running", "Succeeded"))
                    pods[key] = changed
            view = dict(pods)
            kept.update(view)
            fresh = SharingFacts(RESERVATIONS)
            fresh.update(copy.deepcopy(view))
            assert kept.in_use == fresh.in_use, seed
            assert kept.reservations.keys() == fresh.reservations.keys(), seed
            assert kept.waiting.keys() == fresh.waiting.keys(), seed
