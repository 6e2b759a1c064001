"""An eviction stamped on a group bound in a burst, before the group is created, is not lost.

While a burst lasts kai binds a new group's pods and creates the group after the burst
(kai.operator.group_writes). A stamp patched meanwhile finds no group (404) and was
dropped; it is now kept until the group exists, then written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from kai.api.podgroups import LAST_EVICTION_ANNOTATION
from kai.engine.evictions.decisions import GroupStamps
from kai.kube.client import ApiError, Kube
from kai.operator.stamps import StampWriter

GROUP = "team/pg-burst"
EVICTED_AT = datetime(2026, 12, 5, 3, 40, tzinfo=UTC)


class PodGroupsApi:
    """The PodGroups that exist, and the merge patches sent to them (404 for the others)."""

    def __init__(self) -> None:
        self.existing: set[str] = set()
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        key = "/".join(path.split("/")[-3::2])  # .../namespaces/NS/podgroups/NAME
        if key not in self.existing:
            raise ApiError("PATCH", path, 404, "NotFound", f"podgroups {key} not found")
        self.patches.append((key, patch))


async def test_an_eviction_of_a_group_still_to_be_created_is_written_once_it_is() -> None:
    api = PodGroupsApi()
    writer = StampWriter(cast(Kube, api), 4)
    stamp = {GROUP: GroupStamps(None, None, EVICTED_AT)}
    await writer.publish({}, stamp, (), {}, awaited={GROUP})
    assert api.patches == [] and writer.owed == 1  # nothing to patch yet, and kept

    api.existing.add(GROUP)  # the cycle after the burst created it
    await writer.publish({}, {}, (), {}, awaited=set())
    assert api.patches == [
        (GROUP, {"metadata": {"annotations": {LAST_EVICTION_ANNOTATION: "2026-12-05T03:40:00Z"}}})
    ]
    assert writer.owed == 0


async def test_a_stamp_for_a_group_that_is_gone_and_not_awaited_is_dropped() -> None:
    api = PodGroupsApi()
    writer = StampWriter(cast(Kube, api), 4)
    await writer.publish({}, {GROUP: GroupStamps(None, None, EVICTED_AT)}, (), {})
    assert api.patches == [] and writer.owed == 0
