"""The engine's PodGroup timestamps, written back as KAI's annotations so the next cycle reads them.

Min-runtime counts from `kai.scheduler/last-start-timestamp`, the preemption delay from
`kai.scheduler/last-eviction-timestamp` and the stale-gang grace from
`kai.scheduler/stale-podgroup-timestamp`; the engine computes each cycle which of them
change (`CycleResult.stamps`) and reads them back from the PodGroup the next cycle, so a
protection works in a live cluster only if they are written. A start is written only
for a group this cycle really bound a pod of: the engine stamps the start of the gangs it
decided to bind, and a bind can still fail. The patch is a merge patch on the PodGroup's
metadata (a None value removes the annotation), sent only when the cache shows otherwise,
and sent again next cycle if it failed. A group the pod grouper creates in the cycle that
binds it gets its start in the create (`start_annotations`; the grouper says which creates
carried one): no patch then, and a start carried by a group none of whose pods was bound
after all is taken back. A group bound in a burst is created once the burst is over; the
stamps it gets meanwhile (an eviction) wait for it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import structlog

from kai.api.podgroups import LAST_START_ANNOTATION, stamp_annotations
from kai.engine.evictions.decisions import GroupStamps
from kai.kube.client import ApiError, Kube
from kai.kube.writes import run_bounded
from kai.operator.status import pod_group_path

log = structlog.get_logger(__name__)

_NOT_FOUND = 404


class StampWriter:
    """Writes the engine's stamps, and keeps those not yet written until a write succeeds."""

    def __init__(self, kube: Kube, concurrency: int) -> None:
        self._kube = kube
        self._concurrency = concurrency
        self._owed: dict[str, dict[str, str | None]] = {}  # PodGroup key -> annotations to write
        self.writes = 0

    async def publish(
        self,
        pod_groups: Mapping[str, Mapping[str, Any]],
        stamps: Mapping[str, GroupStamps],
        started: Collection[str],
        created_with: Mapping[str, Mapping[str, str]],
        awaited: Collection[str] = (),
    ) -> None:
        """Write each group's changed annotations; `started` are the groups with a pod bound,
        `created_with` the annotations that this cycle's PodGroup creates carried,
        `awaited` the groups the pod grouper has yet to create (bound in a burst).

        `pod_groups` is the cycle's view, which lacks the groups the pod grouper created in
        this same cycle: their stamps are written all the same (the engine stamps a group
        once, when it starts). A failed write is owed and sent again next cycle, unless
        the group is gone: the engine does not stamp a start twice. The stamps of an
        awaited group (its pods evicted before the burst ended) are kept, unsent, until
        the group is created: a patch would find no group and the stamp would be lost.
        """
        for key, stamp in stamps.items():
            wanted = stamp_annotations(stamp.last_start, stamp.stale_since, stamp.last_eviction)
            if key not in started:
                del wanted[LAST_START_ANNOTATION]
            self._owed[key] = {**self._owed.get(key, {}), **wanted}
        for key, carried in created_with.items():
            if key not in started:  # no pod of it was bound after all: no start to show
                self._owed[key] = {**self._owed.get(key, {}), **dict.fromkeys(carried)}
        writes = []
        for key, owed in sorted(self._owed.items()):
            current = {**_annotations(pod_groups.get(key)), **created_with.get(key, {})}
            changed = {name: value for name, value in owed.items() if current.get(name) != value}
            if not changed:
                del self._owed[key]
                continue
            if key in awaited and key not in pod_groups:
                continue
            namespace, _, name = key.partition("/")
            path = pod_group_path({"metadata": {"namespace": namespace, "name": name}})
            writes.append((key, _patcher(self._kube, path, {"metadata": {"annotations": changed}})))
        self.writes += len(writes)
        failures = await run_bounded(writes, self._concurrency)
        for key, _ in writes:
            error = failures.get(key)
            if error is None or (isinstance(error, ApiError) and error.status == _NOT_FOUND):
                self._owed.pop(key, None)
            else:
                log.warning("podgroup timestamps not written", podgroup=key, error=str(error))

    @property
    def owed(self) -> int:
        """How many PodGroups have timestamps waiting for a successful write."""
        return len(self._owed)


def _annotations(group: Mapping[str, Any] | None) -> Mapping[str, str]:
    metadata = (group or {}).get("metadata") or {}
    found: Mapping[str, str] = metadata.get("annotations") or {}
    return found


def _patcher(kube: Kube, path: str, patch: Mapping[str, Any]) -> Any:
    return lambda: kube.merge_patch(path, patch)


def start_annotations(stamps: Mapping[str, GroupStamps]) -> dict[str, dict[str, str]]:
    """The start annotation of each stamped group, for its create: a group created this
    cycle has a start stamp only if the cycle binds it (the engine stamps a start where
    a gang reaches its minimum)."""
    found = {}
    for key, stamp in stamps.items():
        if stamp.last_start is not None:
            start = stamp_annotations(stamp.last_start, None, None)[LAST_START_ANNOTATION]
            if start is not None:
                found[key] = {LAST_START_ANNOTATION: start}
    return found
