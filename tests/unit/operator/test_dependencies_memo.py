"""The snapshot builder's memo of pods that depend on other objects
(`kai.operator.dependencies_memo`): the same pod object while its parse and what it read of
the cluster are the same, a new reading once a claim changes or a ConfigMap comes or goes."""

from __future__ import annotations

from typing import Any

from kai.api.dependencies import ClusterObjects
from kai.api.pods import parse_pod
from kai.api.volumes import SELECTED_NODE_ANNOTATION, VolumeObjects
from kai.engine.model import Prerequisite, Requirement
from kai.engine.prerequisites import MISSING_CONFIG_MAPS, VOLUME_CLAIM_NOT_READY
from kai.operator.dependencies_memo import DependenciesMemo
from tests.unit.api.volume_manifests import (
    claim,
    claim_volume,
    claimant,
    local_disk,
    storage_class,
    volume_objects,
)

NO_VOLUMES = VolumeObjects({}, {}, {})


def _cluster(volumes: VolumeObjects = NO_VOLUMES, *config_maps: str) -> ClusterObjects:
    return ClusterObjects(volumes, frozenset(config_maps))


def test_the_memo_gives_back_the_same_pod_until_a_claim_changes() -> None:
    manifest = claimant(claim_volume("out"))
    pod = parse_pod(manifest, "ml/g")
    zones = [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]
    zonal = storage_class("zonal", "WaitForFirstConsumer", allowedTopologies=zones)
    unbound = claim("out", storageClassName="zonal")
    memo = DependenciesMemo()
    first = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(unbound, zonal)))
    assert first is not pod and first.placement.volume_terms
    memo.end_cycle()
    again = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(unbound, zonal)))
    assert again is first
    memo.end_cycle()
    told = claim("out", {SELECTED_NODE_ANNOTATION: "node-2"}, storageClassName="zonal")
    moved = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(told, zonal)))
    assert moved is not first
    assert moved.placement.volume_terms == (((Requirement("metadata.name", "In", ("node-2",)),),),)
    memo.end_cycle()
    missing = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(zonal)))
    assert missing.waits_for == Prerequisite(VOLUME_CLAIM_NOT_READY, "claim ml/out does not exist")


def test_a_claim_taking_a_volume_made_beforehand_is_read_again_when_its_pool_changes() -> None:
    manifest = claimant(claim_volume("data"))
    pod = parse_pod(manifest, "ml/g")
    local = storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")
    data = claim("data", storageClassName="local", resources={"requests": {"storage": "50Gi"}})
    small, large = local_disk("a1", "node-a", "10Gi"), local_disk("b1", "node-b", "100Gi")
    memo = DependenciesMemo()
    first = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(data, local, small, large)))
    assert dict(first.scalars) == {
        "volume/local/Filesystem/10Gi+": 1000,
        "volume/local/Filesystem/100Gi+": 1000,
    }
    memo.end_cycle()
    again = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(data, local, small, large)))
    assert again is first
    memo.end_cycle()
    larger = local_disk("b1", "node-b", "200Gi")
    grown = memo.applied(
        "ml/p", pod, manifest, _cluster(volume_objects(data, local, small, larger))
    )
    assert dict(grown.scalars) == {
        "volume/local/Filesystem/10Gi+": 1000,
        "volume/local/Filesystem/200Gi+": 1000,
    }
    memo.end_cycle()
    taken = local_disk("b1", "node-b", "200Gi", claimRef={"namespace": "ml", "name": "other"})
    left = memo.applied("ml/p", pod, manifest, _cluster(volume_objects(data, local, small, taken)))
    assert left.waits_for is not None and "the largest is 10Gi" in left.waits_for.message


def _reading(config_map: str, node: str | None = None) -> dict[str, Any]:
    manifest = claimant()
    manifest["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": config_map}}]
    if node is not None:
        manifest["spec"]["nodeName"] = node
    return manifest


def test_a_pending_pod_waits_for_its_config_map_until_it_exists() -> None:
    manifest = _reading("settings")
    pod = parse_pod(manifest, "ml/g")
    memo = DependenciesMemo()
    waiting = memo.applied("ml/p", pod, manifest, _cluster(NO_VOLUMES, "ml/other"))
    message = "missing required ConfigMaps in namespace ml: settings"
    assert waiting.waits_for == Prerequisite(MISSING_CONFIG_MAPS, message)
    memo.end_cycle()
    assert memo.applied("ml/p", pod, manifest, _cluster(NO_VOLUMES, "ml/other")) is waiting
    memo.end_cycle()
    assert memo.applied("ml/p", pod, manifest, _cluster(NO_VOLUMES, "ml/settings")) is pod


def test_a_claim_not_ready_is_told_before_a_missing_config_map() -> None:
    manifest = claimant(claim_volume("data"))
    manifest["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    pod = parse_pod(manifest, "ml/g")
    found = DependenciesMemo().applied("ml/p", pod, manifest, _cluster())
    assert found.waits_for is not None and found.waits_for.reason == VOLUME_CLAIM_NOT_READY
