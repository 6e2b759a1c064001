"""Which objects of a snapshot are not the very objects of an earlier one, when its maker knows.

A live scheduler builds a snapshot of thousands of pods every cycle, and few of them
change. The engine's memo (`kai.engine.memo`) and the scheduler's status totals keep what
they derive per object, and found what changed by comparing every object's identity with
the last snapshot's: a millisecond or more each, at 8,000 pods, several times a cycle.
The adapter that builds the snapshots knows what it changed, and says so here; a reader
that saw the earlier tuple reads only that. A reader that did not (another lineage, a
snapshot made some other way, a tuple replaced since) compares everything, which is
always right: the account is checked against the very tuples it names before it is used.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # the model names this module's account in its Snapshot
    from kai.engine.model import Snapshot

T = TypeVar("T")


@dataclass(frozen=True)
class Changes(Generic[T]):
    """One of a snapshot's tuples against an earlier one: each key whose object is not the
    very object it was, with (then, now), None where it is absent. Every other object of
    `now` is the very object of `since`."""

    since: tuple[T, ...]
    now: tuple[T, ...]
    changed: Mapping[str, tuple[T | None, T | None]]

    def holds_for(
        self, seen: tuple[T, ...] | None, now: tuple[T, ...], held: Mapping[str, T]
    ) -> bool:
        """Whether a reader that holds `held` (by key) for the tuple `seen` may read this
        account to get to `now`: it starts there, ends there, and each key held what the
        account says it did."""
        return (
            self.since is seen
            and self.now is now
            and all(held.get(key) is then for key, (then, _) in self.changed.items())
        )

    def holds_for_ids(
        self, seen: tuple[T, ...] | None, now: tuple[T, ...], held: Container[int]
    ) -> bool:
        """As `holds_for`, for a reader that holds the objects by identity."""
        return (
            self.since is seen
            and self.now is now
            and all(then is None or id(then) in held for then, _ in self.changed.values())
        )

    def then(self, later: Changes[T] | None) -> Changes[T] | None:
        """These changes followed by `later`, which must start where these end; else None."""
        if later is None or later.since is not self.now:
            return None
        merged = dict(self.changed)
        for key, (then, now) in later.changed.items():
            first = merged[key][0] if key in merged else then
            if first is now:
                merged.pop(key, None)
            else:
                merged[key] = (first, now)
        return Changes(self.since, later.now, merged)

    def reversed(self) -> Changes[T]:
        return Changes(
            self.now, self.since, {key: (now, then) for key, (then, now) in self.changed.items()}
        )


@dataclass(frozen=True)
class SnapshotChanges:
    """What a snapshot's maker knows changed in each of its tuples (None: not known)."""

    pods: Changes[Any] | None = None
    pod_groups: Changes[Any] | None = None
    nodes: Changes[Any] | None = None


def changes_between(before: Snapshot, after: Snapshot) -> SnapshotChanges:
    """The exact account of what changed from snapshot `before` to `after`, found by
    comparing every object (what an account spares its reader): for a maker that has no
    cheaper way to know, and for tests of those that do."""
    return SnapshotChanges(
        _between(before.pods, after.pods, "key"),
        _between(before.pod_groups, after.pod_groups, "key"),
        _between(before.nodes, after.nodes, "name"),
    )


def _between(then: tuple[T, ...], now: tuple[T, ...], key: str) -> Changes[T]:
    old: dict[str, T] = {getattr(obj, key): obj for obj in then}
    new: dict[str, T] = {getattr(obj, key): obj for obj in now}
    changed = {
        name: (old.get(name), new.get(name))
        for name in old.keys() | new.keys()
        if old.get(name) is not new.get(name)
    }
    return Changes(then, now, changed)


def brought(
    held: dict[str, T],
    current: tuple[T, ...],
    told: Changes[T] | None,
    seen: tuple[T, ...] | None,
    key: Callable[[T], str],
) -> set[str]:
    """Bring `held`, the objects of `seen` by key, to those of `current`; the keys new,
    replaced or gone. From `told` when it holds for this reader, else by comparing every
    object."""
    if told is not None and told.holds_for(seen, current, held):
        for name, (_, now) in told.changed.items():
            if now is None:
                del held[name]
            else:
                held[name] = now
        return set(told.changed)
    now_by_key = {key(obj): obj for obj in current}
    changed = {name for name, obj in now_by_key.items() if held.get(name) is not obj}
    changed.update(held.keys() - now_by_key.keys())
    held.clear()
    held.update(now_by_key)
    return changed
