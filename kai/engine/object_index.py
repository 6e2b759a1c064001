"""A snapshot's pods by key, node and PodGroup, and its PodGroups by key, kept from snapshot to snapshot.

Why: the validator looks at the pods its bindings touch (the bound pods, their nodes'
occupants, their gangs' members), and the live loop at the pods and PodGroups of the
gangs it binds; both found them by walking every pod (and PodGroup) of the snapshot.
On a live cluster of 8,000 pods, whose objects lie scattered in memory, each walk cost
2-3 ms: the validator's three were half of the engine's step in a cycle that binds one
pod. Kept from one snapshot to the next by the snapshot's account of what changed (the
account the engine's memo reads, checked here the same way against the very tuples it
names, and otherwise rebuilt from every object), an index costs what changed.

It derives nothing (no usage, no capacity): a lookup, so the validator, whose modules
import no engine rule, keeps its own arithmetic with it. Each reader owns its own index,
one per lineage of snapshots (the engine's memo keeps the validator's); without one the
validator builds one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.engine.model import Pod, PodGroup, Snapshot


class ObjectIndex:
    """A snapshot's pods by key, by node and by PodGroup, and its PodGroups by key."""

    def __init__(self) -> None:
        self._seen_pods: tuple[Pod, ...] | None = None
        self._seen_groups: tuple[PodGroup, ...] | None = None
        self.pods: dict[str, Pod] = {}
        self.groups: dict[str, PodGroup] = {}
        self._on_node: dict[str, dict[str, Pod]] = {}
        self._of_group: dict[str, dict[str, Pod]] = {}

    @classmethod
    def of(cls, snapshot: Snapshot) -> ObjectIndex:
        index = cls()
        index.update(snapshot)
        return index

    def update(self, snapshot: Snapshot) -> None:
        """Bring the index to `snapshot`: by its account of changes when it starts from the
        tuples this index saw last and names what they held, else from every object."""
        if snapshot.pods is self._seen_pods and snapshot.pod_groups is self._seen_groups:
            return  # the same snapshot again (asked twice in the same cycle)
        changes = snapshot.changes
        told = _usable(changes and changes.pods, self._seen_pods, snapshot.pods, self.pods)
        if told is not None:
            for then, now in told.values():
                if then is not None:
                    self._remove(then)
                if now is not None:
                    self._add(now)
        else:
            self.pods, self._on_node, self._of_group = {}, {}, {}
            for pod in snapshot.pods:
                self._add(pod)
        self._seen_pods = snapshot.pods
        told = _usable(
            changes and changes.pod_groups, self._seen_groups, snapshot.pod_groups, self.groups
        )
        if told is not None:
            for key, (_, now) in told.items():
                if now is None:
                    del self.groups[key]
                else:
                    self.groups[key] = now
        else:
            self.groups = {group.key: group for group in snapshot.pod_groups}
        self._seen_groups = snapshot.pod_groups

    def on_node(self, name: str) -> list[Pod]:
        """The pods naming node `name`, in key order (any phase)."""
        return _in_key_order(self._on_node.get(name))

    def of_group(self, key: str) -> list[Pod]:
        """The pods of PodGroup `key`, in key order (any phase, any scheduler)."""
        return _in_key_order(self._of_group.get(key))

    def _add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        if pod.node is not None:
            self._on_node.setdefault(pod.node, {})[pod.key] = pod
        self._of_group.setdefault(pod.group, {})[pod.key] = pod

    def _remove(self, pod: Pod) -> None:
        del self.pods[pod.key]
        if pod.node is not None:
            _drop(self._on_node, pod.node, pod.key)
        _drop(self._of_group, pod.group, pod.key)


def _usable(
    told: Any, seen: tuple[Any, ...] | None, now: tuple[Any, ...], held: Mapping[str, Any]
) -> Mapping[str, tuple[Any, Any]] | None:
    """The account's changes (key -> (then, now)) if it starts at the tuple seen last, ends
    at `now`, and each key it names held what it says it did; else None. Checked here, not
    taken from the engine's readers of the account."""
    if not told or seen is None or told.since is not seen or told.now is not now:
        return None
    changed: Mapping[str, tuple[Any, Any]] = told.changed
    if any(held.get(key) is not then for key, (then, _) in changed.items()):
        return None
    return changed


def _drop(index: dict[str, dict[str, Pod]], name: str, key: str) -> None:
    members = index[name]
    del members[key]
    if not members:
        del index[name]


def _in_key_order(pods: Mapping[str, Pod] | None) -> list[Pod]:
    return [pods[key] for key in sorted(pods)] if pods else []
