"""Which objects of a watch-cache store changed since a reader last looked at it, by identity.

A watch cache replaces an object that changes and never changes one in place, and a
view of it copies the store's mapping, not its objects. So a reader that keeps facts
derived from thousands of objects (a busy cluster's pods, every cycle) can bring them
up to date from the objects that are not the very ones it saw last time: one pass
comparing identities, against a pass deriving every fact again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class StoreChanges:
    """The keys whose object is new or replaced, and those gone, since the last call."""

    def __init__(self) -> None:
        # The objects seen last (kept alive, so that no new object can take one's identity).
        self._seen: dict[str, Mapping[str, Any]] = {}

    def since_last(self, objects: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
        seen = self._seen
        gone = list(seen.keys() - objects.keys())
        changed = [key for key, obj in objects.items() if seen.get(key) is not obj]
        self._seen = dict(objects)
        return changed, gone
