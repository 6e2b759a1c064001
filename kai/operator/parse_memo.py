"""Parse results by object key, kept from cycle to cycle, so that a snapshot costs what changed.

The watch cache replaces an object that changes, never changes it in place, so an
object that is the very one parsed last cycle need not be looked at again: on a busy
cluster working out each of 8,000 pods' version, group and overlay was most of a
snapshot (70 ms of a one-pod cycle). Even finding those objects by identity, one pass
over the 8,000, was 8% of kai's CPU while pods came one at a time; the cache's copies
say which keys changed (`StoreChanges`), so `kept` looks only at those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Any, Generic, TypeVar, cast

from kai.api.changes import StoreChanges
from kai.api.errors import ManifestError

T = TypeVar("T")

_Entry = tuple[Hashable, Any, Any, object]
"""(version, result or ManifestError, what it was parsed from as the caller gave it, and
the object itself when the result follows from it alone: its `origin`)."""


class ParseMemo(Generic[T]):
    """Parse results by object key, reused while the object's version is unchanged; and,
    for a store read with `kept`, the results of the objects that are the very ones they
    were parsed from alone."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._next: dict[str, _Entry] = {}  # the entries asked for this cycle
        self._reads_store = False  # `kept` was called: entries live while their object does
        self._changes = StoreChanges()
        self._kept: dict[str, T] = {}  # key -> result, for objects parsed from alone
        self._handed: list[str] = []  # the keys the last `kept` left to `get`
        self._gone: list[str] = []  # the keys gone from the store at the last `kept`
        self._all_again = False  # `forget_kept`: the next `kept` hands out every key

    def kept(
        self, objects: Mapping[str, Mapping[str, Any]], unless: Collection[str] = ()
    ) -> tuple[list[T], list[str]]:
        """The results kept for the objects that are the very ones they were parsed from
        alone (see `get`'s `origin`), but for the keys in `unless`; and the keys of the
        others, for the caller to `get` (or leave out, and be handed them again)."""
        self._reads_store = True
        changed, self._gone = self._changes.since_last(objects)
        if self._all_again:
            changed, self._all_again = list(objects), False
        kept = self._kept
        for key in self._gone:
            kept.pop(key, None)
        others = dict.fromkeys(changed)
        for key in changed:
            kept.pop(key, None)
        for key in self._handed:  # not parsed from the object alone since: again
            if key not in kept and key in objects:
                others[key] = None
        for key in unless:
            if key in objects:
                kept.pop(key, None)
                others[key] = None
        self._handed = list(others)
        return list(kept.values()), list(others)

    @property
    def handed(self) -> list[str]:
        """The keys the last `kept` handed out to be parsed."""
        return self._handed

    @property
    def gone(self) -> list[str]:
        """The keys gone from the store at the last `kept` (until the cycle ends)."""
        return self._gone

    def forget_kept(self) -> None:
        """What parsing depends on besides the objects changed: `kept` keeps nothing, once."""
        self._kept = {}
        self._all_again = True

    def get(
        self,
        key: str,
        version: Hashable,
        parse: Callable[[], T],
        source: object = None,
        reuse: Callable[[Any, T], T | None] | None = None,
        origin: object = None,
    ) -> T | ManifestError:
        """The object parsed; `reuse(earlier source, earlier result)`, when given, may work
        out a new version's result from the earlier one's (None: parse it). `origin`: the
        object `kept` was given under this key, when the result depends on nothing else
        (never another object: `kept` would hand out its result while that key is held)."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != version:
            found: T | ManifestError | None = None
            if entry is not None and reuse is not None and not isinstance(entry[1], ManifestError):
                found = reuse(entry[2], entry[1])
            if found is None:
                try:
                    found = parse()
                except ManifestError as error:
                    found = error
            entry = (version, found, source, _kept_from(found, origin))
        elif entry[3] is not origin:
            entry = (*entry[:3], _kept_from(entry[1], origin))
        self._next[key] = entry
        if entry[3] is not None and self._reads_store:
            self._kept[key] = cast(T, entry[1])
        return cast(T | ManifestError, entry[1])

    def end_cycle(self) -> None:
        """Forget the objects gone from the cluster: for a store read with `kept`, those it
        no longer holds; otherwise those this cycle did not ask for."""
        if not self._reads_store:
            self._entries, self._next = self._next, {}
            return
        self._entries.update(self._next)
        self._next = {}
        for key in self._gone:
            self._entries.pop(key, None)
        self._gone = []


def _kept_from(found: object, origin: object) -> object:
    """The origin a result is kept for: none for an error, reported every cycle."""
    return None if isinstance(found, ManifestError) else origin
