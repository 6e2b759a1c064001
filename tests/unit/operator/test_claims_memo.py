"""The snapshot builder's memo of claimant pods (`kai.operator.claims_memo`): the same pod
object while its parse and its claims are the same objects, a new reading once one changes."""

from __future__ import annotations

from kai.api.pods import parse_pod
from kai.api.volumes import SELECTED_NODE_ANNOTATION
from kai.engine.model import Requirement
from kai.operator.claims_memo import ClaimsMemo
from tests.unit.api.volume_manifests import (
    claim,
    claim_volume,
    claimant,
    storage_class,
    volume_objects,
)


def test_the_memo_gives_back_the_same_pod_until_a_claim_changes() -> None:
    manifest = claimant(claim_volume("out"))
    pod = parse_pod(manifest, "ml/g")
    zones = [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]
    zonal = storage_class("zonal", "WaitForFirstConsumer", allowedTopologies=zones)
    unbound = claim("out", storageClassName="zonal")
    memo = ClaimsMemo()
    first = memo.applied("ml/p", pod, manifest, volume_objects(unbound, zonal))
    assert first is not pod and first.placement.volume_terms
    memo.end_cycle()
    assert memo.applied("ml/p", pod, manifest, volume_objects(unbound, zonal)) is first
    memo.end_cycle()
    told = claim("out", {SELECTED_NODE_ANNOTATION: "node-2"}, storageClassName="zonal")
    moved = memo.applied("ml/p", pod, manifest, volume_objects(told, zonal))
    assert moved is not first
    assert moved.placement.volume_terms == (((Requirement("metadata.name", "In", ("node-2",)),),),)
    memo.end_cycle()
    missing = memo.applied("ml/p", pod, manifest, volume_objects(zonal))
    assert missing.volume_wait == "claim ml/out does not exist"
