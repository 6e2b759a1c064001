"""The engine's PodGroup timestamps, written back as KAI's annotations so the next cycle reads them.

Min-runtime counts from `kai.scheduler/last-start-timestamp`, the preemption delay from
`kai.scheduler/last-eviction-timestamp` and the stale-gang grace from
`kai.scheduler/stale-podgroup-timestamp`; the engine computes each cycle which of them
change (`CycleResult.stamps`) and reads them back from the PodGroup the next cycle, so a
protection works in a live cluster only if they are written. A start is written only
for a group this cycle really bound a pod of: the engine stamps the start of the gangs it
decided to bind, and a bind can still fail. The patch is a merge patch on the PodGroup's
metadata (a None value removes the annotation), sent only when the cache shows otherwise.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import structlog

from kai.api.podgroups import LAST_START_ANNOTATION, stamp_annotations
from kai.engine.evictions.decisions import GroupStamps
from kai.kube.client import Kube
from kai.kube.writes import run_bounded
from kai.operator.status import pod_group_path

log = structlog.get_logger(__name__)


class StampWriter:
    def __init__(self, kube: Kube, concurrency: int) -> None:
        self._kube = kube
        self._concurrency = concurrency
        self.writes = 0

    async def publish(
        self,
        pod_groups: Mapping[str, Mapping[str, Any]],
        stamps: Mapping[str, GroupStamps],
        started: Collection[str],
    ) -> None:
        """Write each group's changed annotations; `started` are the groups with a pod bound."""
        writes = []
        for key, stamp in sorted(stamps.items()):
            group = pod_groups.get(key)
            if group is None:
                continue
            metadata = group.get("metadata") or {}
            current: Mapping[str, str] = metadata.get("annotations") or {}
            wanted = stamp_annotations(stamp.last_start, stamp.stale_since, stamp.last_eviction)
            if key not in started and wanted[LAST_START_ANNOTATION] != current.get(
                LAST_START_ANNOTATION
            ):
                wanted[LAST_START_ANNOTATION] = current.get(LAST_START_ANNOTATION)
            changed = {name: value for name, value in wanted.items() if current.get(name) != value}
            if changed:
                path = pod_group_path(group)
                patch = {"metadata": {"annotations": changed}}
                writes.append((key, _patcher(self._kube, path, patch)))
        self.writes += len(writes)
        failures = await run_bounded(writes, self._concurrency)
        for key, error in failures.items():
            # The engine computes the stamps again next cycle from what the cluster shows.
            log.warning("podgroup timestamps not written", podgroup=key, error=str(error))


def _patcher(kube: Kube, path: str, patch: Mapping[str, Any]) -> Any:
    return lambda: kube.merge_patch(path, patch)
