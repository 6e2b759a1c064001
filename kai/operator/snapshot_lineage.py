"""What the snapshot builder tells the engine changed since its last snapshot.

The engine's memo and the status totals keep what they derive per pod, PodGroup and
node, and would otherwise find what changed by comparing every object with the last
snapshot's (`kai.engine.snapshot_changes`). The builder knows which keys it handed out
to be parsed this cycle and which are gone; every other object of the snapshot is the
very object of the last one. This keeps, per kind, the last snapshot's objects by key,
so that it can say which of those keys now hold another object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from kai.engine.snapshot_changes import Changes

T = TypeVar("T")


class Lineage(Generic[T]):
    """One kind's objects in the builder's last snapshot, by key."""

    def __init__(self, key: Callable[[T], str]) -> None:
        self._key = key
        self._last: tuple[T, ...] | None = None
        self._by_key: dict[str, T] = {}

    def changes(
        self, now: tuple[T, ...], found: Mapping[str, T] | None, candidates: Iterable[str]
    ) -> Changes[T] | None:
        """What changed from the last snapshot's tuple to `now`. `candidates`: every key
        whose object may not be the very one it was; `found`: the objects of `now` under
        those keys (a key absent: not in `now`). `found` None: the builder cannot say which
        keys changed, and the account starts over from `now`."""
        last, self._last = self._last, now
        if found is None or last is None:
            self._by_key = {self._key(obj): obj for obj in now}
            return None
        by_key = self._by_key
        changed: dict[str, tuple[T | None, T | None]] = {}
        for key in candidates:
            before, after = by_key.get(key), found.get(key)
            if before is after:
                continue
            changed[key] = (before, after)
            if after is None:
                del by_key[key]
            else:
                by_key[key] = after
        return Changes(last, now, changed)
