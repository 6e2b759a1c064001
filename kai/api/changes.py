"""Which objects of a watch-cache store changed since a reader last looked at it.

A watch cache replaces an object that changes and never changes one in place, and a
view of it copies the store's mapping, not its objects. So a reader that keeps facts
derived from thousands of objects (a busy cluster's pods, every cycle) can bring them
up to date from the objects that are not the very ones it saw last time: one pass
comparing identities, against a pass deriving every fact again.

Even that pass costs a millisecond at 8,000 pods, and a live cycle made a dozen of
them. So a store copy can also say which keys changed since an earlier copy
(`LoggedObjects`, from the `ChangeLog` its cache keeps of every watch event), and a
reader then compares only those: a cycle's cost follows what changed. A copy that
cannot say (made some other way, or from before a relist or the log's trimmed start)
gets the whole pass, which is always right.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, NoReturn

_LOG_LIMIT = 100_000
"""Keys a log holds before it forgets its older half (a reader that far behind reads all)."""


class ChangeLog:
    """The keys of one store's changes in order, for readers that each keep their place.

    A place is the log's `end` when a copy was made; what changed after it is
    `since(place)`, or None when the log cannot say (a reset or trim passed it)."""

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._start = 0  # the place of `_keys[0]`; before it the log knows nothing

    @property
    def end(self) -> int:
        return self._start + len(self._keys)

    def note(self, key: str) -> None:
        self._keys.append(key)
        if len(self._keys) > _LOG_LIMIT:
            half = len(self._keys) // 2
            del self._keys[:half]
            self._start += half

    def reset(self) -> None:
        """Anything may have changed (the store was listed again): no earlier place is known."""
        self._start = self.end + 1
        self._keys = []

    def since(self, place: int) -> Collection[str] | None:
        if place < self._start or place > self.end:
            return None
        return dict.fromkeys(self._keys[place - self._start :]).keys()


class LoggedObjects(dict[str, Any]):
    """A read-only copy of a store that knows its place in the store's `ChangeLog`.

    A dict, so reading it runs at C speed; a copy or a comprehension of it is a plain
    dict and no longer claims to know what changed."""

    def __init__(self, objects: Mapping[str, Any], log: ChangeLog, place: int) -> None:
        super().__init__(objects)
        self.log = log
        self.place = place

    def _read_only(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a store copy is read-only")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only


class StoreChanges:
    """The keys whose object is new or replaced, and those gone, since the last call."""

    def __init__(self) -> None:
        # The objects seen last (kept alive, so that no new object can take one's identity).
        self._seen: dict[str, Mapping[str, Any]] = {}
        self._place: tuple[ChangeLog, int] | None = None

    def since_last(self, objects: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
        touched = self._touched(objects)
        self._place = (objects.log, objects.place) if isinstance(objects, LoggedObjects) else None
        if touched is None:
            seen = self._seen
            gone = list(seen.keys() - objects.keys())
            changed = [key for key, obj in objects.items() if seen.get(key) is not obj]
            self._seen = dict(objects)
            return changed, gone
        return self._compare(objects, touched)

    def _touched(self, objects: Mapping[str, Any]) -> Collection[str] | None:
        """The keys that may differ from the last call's, if the copies can say."""
        if self._place is None or not isinstance(objects, LoggedObjects):
            return None
        log, place = self._place
        if objects.log is not log or objects.place < place:
            return None
        return log.since(place)

    def _compare(
        self, objects: Mapping[str, Mapping[str, Any]], keys: Iterable[str]
    ) -> tuple[list[str], list[str]]:
        seen, changed, gone = self._seen, [], []
        for key in keys:
            obj = objects.get(key)
            if obj is None:
                if seen.pop(key, None) is not None:
                    gone.append(key)
            elif seen.get(key) is not obj:
                seen[key] = obj
                changed.append(key)
        return changed, gone
