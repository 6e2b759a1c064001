"""One resource kept current in memory: list once, then follow the watch stream.

An informer lists its resource (in pages, `kai.kube.listing`), then watches from the list's
resourceVersion. A watch that the server ends is resumed from the last version
seen; an expired version (410 Gone) or a failure to resume causes a full relist,
which replaces the store, so objects deleted while the watch was down do not
linger. A line that is no event (undecodable, or over the read buffer) and any
unexpected error also cause a relist, after a backoff: the informer never ends
but by cancellation. Nothing lists per scheduling cycle: readers copy the store, a dict of
objects that are replaced on change and never mutated.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from kai.kube.client import ApiError, Kube, UnreadableEventError
from kai.kube.listing import list_all

log = structlog.get_logger(__name__)

_GONE = 410
_MAX_BACKOFF_SECONDS = 30.0


@dataclass(frozen=True)
class Resource:
    """A collection the operator watches: its API path and whether it is namespaced."""

    kind: str
    path: str
    namespaced: bool
    optional: bool = False
    """Absent from some clusters (a CRD not installed): missing means empty, not broken."""
    names_only: bool = False
    """Only which objects exist is read: the store keeps their names, not their contents
    (a cluster's ConfigMaps may hold megabytes each), and a change of contents is none."""


def object_key(obj: Mapping[str, Any]) -> str:
    """ "namespace/name", or "name" for cluster-scoped objects."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = str(metadata.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without managedFields, which nothing here reads and which doubles its size."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        obj = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    return obj


def _substance(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object less what changes when nothing happened: its resourceVersion, and the
    heartbeat times of its conditions (a kubelet reports a Node's unchanged conditions
    every few minutes). Readers are not told of an update that changes only these."""
    metadata = obj.get("metadata")
    status = obj.get("status")
    if isinstance(metadata, dict) and "resourceVersion" in metadata:
        obj = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "resourceVersion"}}
    if isinstance(status, dict) and isinstance(status.get("conditions"), list):
        conditions = [
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"} if isinstance(c, dict) else c
            for c in status["conditions"]
        ]
        obj = {**obj, "status": {**status, "conditions": conditions}}
    return obj


def _name_only(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's identity and version, for a store that reads only which objects exist."""
    metadata = obj.get("metadata")
    kept = ("name", "namespace", "uid", "resourceVersion")
    if not isinstance(metadata, dict):
        return {}
    return {"metadata": {key: metadata[key] for key in kept if key in metadata}}


class Store:
    """The objects of one resource by key, and the resourceVersion they are current at."""

    def __init__(self, names_only: bool = False) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version: str | None = None
        self._slim = _name_only if names_only else _slim

    def replace(self, items: Iterable[dict[str, Any]], version: str) -> None:
        """A fresh listing: everything not in it is gone."""
        self.objects = {object_key(item): self._slim(item) for item in items}
        self.version = version

    def apply(self, event: Mapping[str, Any]) -> bool:
        """Apply one watch event; False for events that change no object (bookmarks) and
        for updates that change nothing but the object's version and heartbeats."""
        kind = event.get("type")
        obj = event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = str(version)
        if kind in ("ADDED", "MODIFIED"):
            key = object_key(obj)
            before = self.objects.get(key)
            self.objects[key] = self._slim(obj)
            return before is None or _substance(before) != _substance(self.objects[key])
        if kind == "DELETED":
            self.objects.pop(object_key(obj), None)
            return True
        return False


@dataclass(frozen=True, slots=True)
class Change:
    """What one change to a store was, for the informer's `on_change`."""

    kind: str
    key: str | None
    """The object's key; None when the store was listed again (anything may have changed)."""
    arrived: Mapping[str, Any] | None = None
    """The object, when a watch event brought it under a key the store did not hold: a
    reader may act on an arrival at once and let other changes settle."""


def _change(kind: str, event: Mapping[str, Any], held: Mapping[str, Any]) -> Change:
    """The change `event` makes to a store holding the keys in `held` (before it is applied)."""
    obj = event.get("object") or {}
    key = object_key(obj)
    new = event.get("type") in ("ADDED", "MODIFIED") and key not in held
    return Change(kind, key, obj if new else None)


class ExpiredError(Exception):
    """The watch's resourceVersion is too old (410 Gone): only a relist can continue."""


class Informer:
    """Keeps a Store of one resource current; `on_change` is called after every change."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        on_change: Callable[[Change], None],
        watch_seconds: int = 300,
    ) -> None:
        self.resource = resource
        self.store = Store(resource.names_only)
        self.synced = asyncio.Event()
        self.relists = 0
        self._kube = kube
        self._on_change = on_change
        self._watch_seconds = watch_seconds

    async def run(self) -> None:
        """List and watch until cancelled; failures are logged and retried with backoff.

        Nothing but cancellation ends it: an informer that stopped would leave its
        store frozen (and, under the cache's TaskGroup, stop every other informer).
        """
        failures = 0
        must_list = True
        while True:
            try:
                if must_list:
                    await self._list()
                    must_list = False
                await self._watch()
                failures = 0
            except ExpiredError:
                log.info("watch expired; relisting", resource=self.resource.kind)
                must_list = True
            except ApiError as error:
                if error.status == 404 and self.resource.optional:
                    self._mark_absent()
                    await asyncio.sleep(_MAX_BACKOFF_SECONDS)
                    must_list = True
                    continue
                failures += 1
                # A resume can only work with a version the server still has; after
                # repeated failures relist instead of trusting it.
                must_list = must_list or failures > 2
                await self._back_off(failures, "watch failed; retrying", error)
            except UnreadableEventError as error:
                # The event that line carried is lost, and resuming would replay it.
                failures += 1
                must_list = True
                await self._back_off(failures, "unreadable watch event; relisting", error)
            except Exception as error:  # a bug here must not freeze the store
                failures += 1
                must_list = True
                await self._back_off(failures, "informer failed; relisting", error, trace=True)

    async def _back_off(
        self, failures: int, message: str, error: Exception, trace: bool = False
    ) -> None:
        delay = min(_MAX_BACKOFF_SECONDS, 0.2 * 2**failures) * (0.5 + random.random())
        log.warning(
            message,
            resource=self.resource.kind,
            error=f"{type(error).__name__}: {error}",
            retry_seconds=round(delay, 2),
            exc_info=error if trace else None,
        )
        await asyncio.sleep(delay)

    async def _list(self) -> None:
        items, version = await list_all(self._kube, self.resource.path)
        self.store.replace(items, version)
        self.relists += 1
        self.synced.set()
        self._on_change(Change(self.resource.kind, None))

    async def _watch(self) -> None:
        query = [
            ("resourceVersion", self.store.version or ""),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._watch_seconds)),
        ]
        stream = self._kube.watch(self.resource.path, query, timeout=self._watch_seconds + 30)
        # Closed at once when this raises, not whenever the generator is collected.
        async with contextlib.aclosing(stream):
            async for event in stream:
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    if status.get("code") == _GONE:
                        raise ExpiredError(str(status.get("message") or ""))
                    raise ApiError(
                        "WATCH",
                        self.resource.path,
                        int(status.get("code") or 0),
                        str(status.get("reason") or "Error"),
                        str(status.get("message") or ""),
                    )
                change = _change(self.resource.kind, event, self.store.objects)
                if self.store.apply(event):
                    self._on_change(change)

    def _mark_absent(self) -> None:
        if self.store.objects or not self.synced.is_set():
            self.store.replace([], "")
            self.synced.set()
            self._on_change(Change(self.resource.kind, None))
