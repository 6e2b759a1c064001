"""A watch-cache store as `ClusterCache` keeps it, for tests of its readers: objects
replaced, never changed in place, each change noted in the store's `ChangeLog`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.api.changes import ChangeLog, LoggedObjects


class LoggedStore:
    def __init__(self, objects: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.objects: dict[str, dict[str, Any]] = dict(objects or {})
        self.log = ChangeLog()

    def put(self, key: str, obj: dict[str, Any]) -> None:
        self.objects[key] = obj
        self.log.note(key)

    def delete(self, key: str) -> None:
        if self.objects.pop(key, None) is not None:
            self.log.note(key)

    def relist(self) -> None:
        self.objects = {key: dict(obj) for key, obj in self.objects.items()}
        self.log.reset()

    def copy(self) -> LoggedObjects:
        return LoggedObjects(self.objects, self.log, self.log.end)


def identity_diff(
    before: Mapping[str, object], after: Mapping[str, object]
) -> tuple[set[str], set[str]]:
    """What a reader of `before` then `after` must be told: the keys whose object is not
    the very one it was (new ones too), and the keys gone."""
    changed = {key for key, obj in after.items() if before.get(key) is not obj}
    return changed, set(before) - set(after)


class LoggedDict(dict[str, Any]):
    """A store a test changes as a dict, each change noted in `store` as the live cache
    notes it; `store.copy()` is the view's copy of it."""

    def __init__(self, objects: Mapping[str, Any] | None = None) -> None:
        super().__init__(objects or {})
        self.store = LoggedStore(self)

    def __setitem__(self, key: str, obj: Any) -> None:
        super().__setitem__(key, obj)
        self.store.put(key, obj)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.store.delete(key)
