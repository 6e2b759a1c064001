"""Several informers behind one change signal: the generic half of a watch cache.

A consumer (the scheduling loop) waits on one event that any informer sets, and
copies the stores it reads (`current`) without yielding to the event loop, so no
watch event lands halfway through a read of several stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from kai.kube.client import Kube
from kai.kube.informer import Change, Informer, Resource

Objects = Mapping[str, Mapping[str, Any]]


class WatchCache:
    """One informer per resource, a revision counter and a `changed` event for readers."""

    def __init__(self, kube: Kube, resources: Iterable[Resource], watch_seconds: int = 300) -> None:
        self.changed = asyncio.Event()
        self.revision = 0
        self._informers = {
            resource.kind: Informer(kube, resource, self._note_change, watch_seconds)
            for resource in resources
        }

    def _note_change(self, _change: Change) -> None:
        """Every informer's `on_change`; a subclass that reads the changes extends it."""
        self.revision += 1
        self.changed.set()

    async def run(self) -> None:
        """Run every informer until cancelled."""
        async with asyncio.TaskGroup() as group:
            for informer in self._informers.values():
                group.create_task(informer.run(), name=f"informer-{informer.resource.kind}")

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self._informers.values())

    async def wait_synced(self) -> None:
        for informer in self._informers.values():
            await informer.synced.wait()

    @property
    def relists(self) -> int:
        return sum(informer.relists for informer in self._informers.values())

    def current(self, resource: Resource) -> Objects:
        """One store as it is, not copied: it changes with the next event, and its reader
        must not change it. The store's own dict, so that a copy of it is a dict's copy
        (copying through a read-only proxy reads key by key, several times slower)."""
        return self._informers[resource.kind].store.objects
