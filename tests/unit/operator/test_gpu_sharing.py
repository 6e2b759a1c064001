"""Which reservation pod holds a shared device: one being deleted holds nothing."""

from __future__ import annotations

from typing import Any

from kai.operator.gpu_sharing import GPU_GROUP_LABEL, GpuSharing, _reservation_of


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
