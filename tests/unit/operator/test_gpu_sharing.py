"""Which reservation pod holds a shared device: one being deleted holds nothing."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import pytest

from kai.api.admission import gpu_sharing_injection
from kai.api.constants import GPU_GROUP_LABEL
from kai.api.parse import parse_pod
from kai.operator.gpu_sharing import (
    GPU_UUID_ANNOTATION,
    GpuSharing,
    _reservation_of,
)


def _reservation(name: str, group: str, deleting: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {GPU_GROUP_LABEL: group}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-06-01T00:00:00Z"
    return {"metadata": metadata}


def test_a_terminating_reservation_pod_does_not_hold_its_device() -> None:
    going = _reservation("old", "dev-1", deleting=True)
    assert _reservation_of({"ns/old": going}, "dev-1") is None
    staying = _reservation("new", "dev-1", deleting=False)
    assert _reservation_of({"ns/old": going, "ns/new": staying}, "dev-1") is staying


async def test_locks_of_devices_whose_reservation_exists_are_not_kept_for_ever() -> None:
    # Devices get a fresh group id each time they are opened for sharing, so a lock kept per
    # group would grow without bound. A reservation the cache shows needs no API call.
    sharing = GpuSharing(None, "kai-resource-reservation", "image", None, 4)  # type: ignore[arg-type]
    reservations = {
        f"ns/r-{i}": _reservation(f"r-{i}", f"dev-{i}", deleting=False) for i in range(3)
    }
    for i in range(3):
        await sharing._ensure_reservation(f"dev-{i}", "n1", reservations)
    assert sharing.remembered == 3
    sharing.forget_created(reservations)
    assert sharing.remembered == 0


class _RecordingKube:
    """Creates and merge patches, kept as the objects they make."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    async def create(self, path: str, body: Mapping[str, Any], proceed: Any = None) -> None:
        self.objects[f"{path}/{body['metadata']['name']}"] = dict(body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> None:
        data = self.objects.setdefault(path, {}).setdefault("data", {})
        data.update(patch.get("data") or {})


def _fraction_pod(annotations: dict[str, str], init: bool = False) -> dict[str, Any]:
    containers = [{"name": "main", "image": "busybox"}, {"name": "second", "image": "busybox"}]
    spec: dict[str, Any] = {"schedulerName": "kai-scheduler", "containers": containers}
    if init:
        spec["initContainers"] = [{"name": "setup", "image": "busybox"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "uid": "u-1",
            "annotations": annotations,
        },
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("annotations", "init"),
    [
        ({"gpu-fraction": "0.5"}, False),
        ({"gpu-fraction": "0.5", "gpu-fraction-container-name": "second"}, False),
        ({"gpu-memory": "2000", "gpu-fraction-container-name": "setup"}, True),
    ],
)
async def test_a_pod_the_webhook_wired_finds_every_key_it_reads_once_bound(
    annotations: dict[str, str], init: bool
) -> None:
    # The webhook's env refs, envFrom and volume name ConfigMaps the binder must make, and
    # each key read from them must be there, or the container does not start.
    manifest = gpu_sharing_injection(_fraction_pod(annotations, init), "nvidia")
    assert manifest is not None
    kube = _RecordingKube()
    sharing = GpuSharing(kube, "kai-resource-reservation", "image", None, 4)  # type: ignore[arg-type]
    reservation = _reservation("r", "dev-1", deleting=False)
    reservation["metadata"]["annotations"] = {GPU_UUID_ANNOTATION: "GPU-1234"}
    pod = parse_pod(manifest, "ml/pg")
    await sharing.prepare(manifest, pod, "n1", ("dev-1",), Fraction(1, 2), {"r/r": reservation})

    made = {
        path.rsplit("/", 1)[1]: body.get("data", {})
        for path, body in kube.objects.items()
        if "/configmaps/" in path
    }
    spec = manifest["spec"]
    wired = [c for c in spec.get("initContainers", []) + spec["containers"] if "env" in c]
    (container,) = wired
    for var in container["env"]:
        ref = var["valueFrom"]["configMapKeyRef"]
        assert ref["key"] in made[ref["name"]], (ref, made)
    assert {source["configMapRef"]["name"] for source in container["envFrom"]} <= made.keys()
    assert {volume["configMap"]["name"] for volume in spec["volumes"]} <= made.keys()
    capabilities = spec["volumes"][0]["configMap"]["name"]
    assert made[capabilities] == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-1234",
        "GPU_PORTION": "0.5",
        "RUNAI_NUM_OF_GPUS": "0.5",
    }
    assert made[f"{capabilities}-evar"] == {"GPU_PORTION": "0.5", "RUNAI_NUM_OF_GPUS": "0.5"}
