"""What a pod's volume claims say of where it may run (`kai.api.volumes`), case by case."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.pods import parse_pod
from kai.api.volumes import (
    SELECTED_NODE_ANNOTATION,
    ClaimsReading,
    claim_keys,
    names_claims,
    pod_claims,
    with_claims,
)
from kai.engine.eligibility import node_accepts
from kai.engine.model import Requirement
from tests.unit.api.volume_manifests import (
    BOUND,
    claim,
    claim_volume,
    claimant,
    local_volume,
    storage_class,
    volume_objects,
)
from tests.unit.engine.builders import node


def test_a_pod_with_only_its_api_token_volume_names_no_claim() -> None:
    assert not names_claims(claimant())
    assert names_claims(claimant(claim_volume("data")))
    assert names_claims(claimant({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}))


def test_an_ephemeral_volume_names_the_claim_its_controller_makes() -> None:
    manifest = claimant(
        claim_volume("data"), {"name": "tmp", "ephemeral": {}}, claim_volume("data")
    )
    assert claim_keys(manifest) == ("ml/data", "ml/p-tmp")


def test_a_claim_volume_without_a_claim_name_holds_the_pod_and_names_the_field() -> None:
    reading = pod_claims(claimant({"name": "d", "persistentVolumeClaim": {}}), volume_objects())
    assert reading.wait is not None
    assert "Pod ml/p" in reading.wait
    assert "spec.volumes[1].persistentVolumeClaim.claimName" in reading.wait


def test_a_bound_claim_holds_the_pod_to_where_its_volume_can_be_used() -> None:
    objects = volume_objects(
        claim("data", BOUND, volumeName="disk-1"), local_volume("disk-1", "node-1")
    )
    reading = pod_claims(claimant(claim_volume("data")), objects)
    assert reading == ClaimsReading(
        terms=(((Requirement("kubernetes.io/hostname", "In", ("node-1",)),),),)
    )
    pod = with_claims(parse_pod(claimant(claim_volume("data")), "ml/g"), reading)
    there = node("node-1", labels={"kubernetes.io/hostname": "node-1"})
    elsewhere = node("node-0", labels={"kubernetes.io/hostname": "node-0"})
    assert node_accepts(there, pod.placement)
    assert not node_accepts(elsewhere, pod.placement)


def test_a_claim_to_provision_is_held_to_its_classs_topologies_and_told_the_node() -> None:
    zones = [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}]
    objects = volume_objects(
        claim("out", storageClassName="zonal"),
        storage_class("zonal", "WaitForFirstConsumer", allowedTopologies=zones),
    )
    reading = pod_claims(claimant(claim_volume("out")), objects)
    assert reading.wait is None
    assert reading.terms == (((Requirement("zone", "In", ("a", "b")),),),)
    assert reading.to_provision == ("ml/out",)


def test_a_claim_told_a_node_already_holds_the_pod_there_and_is_not_told_again() -> None:
    objects = volume_objects(
        claim("out", {SELECTED_NODE_ANNOTATION: "node-3"}, storageClassName="late"),
        storage_class("late", "WaitForFirstConsumer"),
    )
    reading = pod_claims(claimant(claim_volume("out")), objects)
    assert reading.terms == (((Requirement("metadata.name", "In", ("node-3",)),),),)
    assert reading.to_provision == ()


@pytest.mark.parametrize(
    ("manifests", "why"),
    [
        ((), "claim ml/data does not exist"),
        (
            (claim("data", storageClassName="gone"),),
            "claim ml/data is not bound, and its StorageClass gone does not exist",
        ),
        ((claim("data"),), "claim ml/data is not bound, and has no StorageClass"),
        (
            (claim("data", storageClassName="fast"), storage_class("fast", "Immediate")),
            "binds volumes at once (Immediate)",
        ),
        (
            (
                claim("data", storageClassName="local"),
                storage_class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner"),
            ),
            "no volume of StorageClass local (Filesystem) made beforehand is free",
        ),
        ((claim("data", volumeName="disk-1"),), "waits for the volume controller"),
        (
            (claim("data", BOUND, volumeName="disk-1"),),
            "claim ml/data is bound to volume disk-1, which does not exist",
        ),
        (
            (
                {
                    **claim("data", BOUND, volumeName="disk-1"),
                    "metadata": {
                        "name": "data",
                        "namespace": "ml",
                        "deletionTimestamp": "2026-12-07T00:00:00Z",
                    },
                },
            ),
            "claim ml/data is being deleted",
        ),
        (
            (
                claim("data", BOUND, volumeName="disk-1"),
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": "disk-1"},
                    "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{}]}}},
                },
            ),
            "PersistentVolume disk-1: spec.nodeAffinity.required.nodeSelectorTerms: every term",
        ),
        (
            (claim("data", storageClassName="odd"), storage_class("odd", "Sometimes")),
            "StorageClass odd: volumeBindingMode",
        ),
    ],
)
def test_a_claim_that_lets_the_pod_run_nowhere_yet_says_why(
    manifests: tuple[dict[str, Any], ...], why: str
) -> None:
    reading = pod_claims(claimant(claim_volume("data")), volume_objects(*manifests))
    assert reading.wait is not None
    assert why in reading.wait
    assert reading.to_provision == ()
