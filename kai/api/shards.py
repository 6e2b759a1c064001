"""Which objects one scheduling shard sees: KAI's node-pool partition (kai-semantics §3.5).

KAI scales out by running one scheduler per node pool. A shard with pool `a` lists
the nodes, queues and PodGroups labelled `kai.scheduler/node-pool=a`; the default
shard (no pool) lists those *without* the label. Pods are not filtered by their own
label: KAI lists every pod and keeps those of its PodGroups and those on its nodes
(they take the nodes' capacity whoever scheduled them). Before a pod has a
PodGroup, its own label decides, as KAI's pod grouper copies it onto the group.

The rule lives here, on plain manifests, so that `kai run` (over its watch cache)
and `kai simulate` (over its input files) cut a cluster into shards the same way,
and the engine never hears of pools: it schedules whatever snapshot it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kai.api.changes import ChangeLog, LoggedObjects, StoreChanges
from kai.api.pods import annotated_pod_group_key

NODE_POOL_LABEL_KEY: Final = "kai.scheduler/node-pool"
"""KAI's `global.nodePoolLabelKey` default."""
DEFAULT_SHARD_NAME: Final = "default"
"""What KAI calls the shard of unlabelled objects (`nodePool` in scheduling conditions)."""

Manifest = Mapping[str, Any]


@dataclass(frozen=True)
class Shard:
    """One node pool's share of the cluster; `pool=None` is the default shard."""

    pool: str | None = None
    label_key: str = NODE_POOL_LABEL_KEY

    @property
    def name(self) -> str:
        return self.pool or DEFAULT_SHARD_NAME

    def pool_of(self, manifest: Manifest) -> str | None:
        """The object's pool label, or None when it has none (an empty value counts as none)."""
        labels = (manifest.get("metadata") or {}).get("labels") or {}
        value = labels.get(self.label_key) if isinstance(labels, Mapping) else None
        return str(value) if value else None

    def owns(self, manifest: Manifest) -> bool:
        """A node, queue or PodGroup (or a not yet grouped pod) of this shard."""
        return self.pool_of(manifest) == self.pool

    def labels_on_bind(self, pod: Manifest) -> dict[str, str]:
        """The labels a bind by this shard writes on the pod (KAI's `nodePoolLabelsChange`):
        its pool, unless the pod carries it already; the default shard writes none."""
        if self.pool is None or self.pool_of(pod) == self.pool:
            return {}
        return {self.label_key: self.pool}

    def lease_name(self, base: str) -> str:
        """Each shard elects its own leader: the pool's Lease is the base name suffixed."""
        return f"{base}-{self.pool}" if self.pool else base


@dataclass(frozen=True)
class ShardObjects:
    """The manifests one shard sees, keyed as given."""

    nodes: dict[str, Manifest]
    queues: dict[str, Manifest]
    pod_groups: dict[str, Manifest]
    pods: dict[str, Manifest]


class Verdicts:
    """Which objects of one kind a shard kept at its last cut, for the next cut.

    A live scheduler cuts its whole watch cache, thousands of pods and PodGroups,
    several times a cycle, and between two cuts few objects change: judging each again
    was a fifth of kai's time while pods came one at a time beside 8,000. An object's
    verdict depends on the object and, for a pod, on one thing besides (`refers`): its
    node's place in the shard, or its PodGroup's (whether it exists, and is the
    shard's). So an object is judged again only when it is not the very object of the
    last cut (a watch cache replaces an object, never changes it) or when what it refers
    to is among the `changed`; every new PodGroup (each plain pod brings one) made every
    pod be judged again while the whole shard was the basis. The cut keeps the order of
    the objects' first sighting, which the cache's order is but for an object judged
    out, then in again (no reader depends on the order). The cut it returns knows its
    place in a log of the keys whose object in the cut changed, so that the cut's
    readers compare only those (`StoreChanges`).
    """

    def __init__(self) -> None:
        self._changes = StoreChanges()
        self._kept: dict[str, Manifest] = {}
        self._log = ChangeLog()  # the keys whose object in the cut changed, for its readers
        self._refers: dict[str, Hashable] = {}  # key -> what else its verdict read
        self._readers: dict[Hashable, set[str]] = {}  # ... and the other way round
        self.touched: tuple[str, ...] = ()
        """The keys of the objects new, replaced or gone at the last cut."""

    def kept(
        self,
        objects: Mapping[str, Manifest],
        keep: Callable[[Manifest], bool],
        refers: Callable[[Manifest], Hashable] | None = None,
        changed: Iterable[Hashable] = (),
    ) -> LoggedObjects:
        again = {key for ref in changed for key in self._readers.get(ref, ())}
        new, gone = self._changes.since_last(objects)
        self.touched = (*new, *gone)
        kept, log = self._kept, self._log
        for key in gone:
            if kept.pop(key, None) is not None:
                log.note(key)
            self._refer(key, None)
        again.difference_update(new)
        for key in (*new, *sorted(again.intersection(objects))):
            obj = objects[key]
            if refers is not None:
                self._refer(key, refers(obj))
            if keep(obj):
                if kept.get(key) is not obj:
                    kept[key] = obj
                    log.note(key)
            elif kept.pop(key, None) is not None:
                log.note(key)
        return LoggedObjects(kept, log, log.end)

    def _refer(self, key: str, ref: Hashable) -> None:
        earlier = self._refers.pop(key, None)
        if earlier is not None:
            keys = self._readers[earlier]
            keys.discard(key)
            if not keys:
                del self._readers[earlier]
        if ref is not None:
            self._refers[key] = ref
            self._readers.setdefault(ref, set()).add(key)


@dataclass
class KeptCut:
    """The verdicts of a shard's last cut of a cluster, and what the pods' verdicts read
    then, for its next cut (see `Verdicts`)."""

    nodes: Verdicts = field(default_factory=Verdicts)
    pod_groups: Verdicts = field(default_factory=Verdicts)
    pods: Verdicts = field(default_factory=Verdicts)

    def changed(self) -> set[Hashable]:
        """What a pod's verdict may read that may not be as at the last cut: the nodes and
        the PodGroups new, replaced or gone since (whether one exists, and is the shard's)."""
        found: set[Hashable] = {_on_node(name) for name in self.nodes.touched}
        found.update(_in_group(key) for key in self.pod_groups.touched)
        return found


def shard_objects(
    shard: Shard,
    nodes: Mapping[str, Manifest],
    queues: Mapping[str, Manifest],
    pod_groups: Mapping[str, Manifest],
    pods: Mapping[str, Manifest],
    remembered: KeptCut | None = None,
) -> ShardObjects:
    """Cut the cluster down to one shard. PodGroups are keyed "namespace/name".
    `remembered`: the verdicts of an earlier cut of these objects, kept up to date."""
    node_names: Container[str]
    if remembered is None:
        own_nodes = {key: node for key, node in nodes.items() if shard.owns(node)}
        node_names = {str((node.get("metadata") or {}).get("name")) for node in own_nodes.values()}
        own_groups = {key: group for key, group in pod_groups.items() if shard.owns(group)}
    else:
        own_nodes = remembered.nodes.kept(nodes, shard.owns)
        node_names = own_nodes.keys()  # a watch cache keys a node by its name
        own_groups = remembered.pod_groups.kept(pod_groups, shard.owns)

    def keep(pod: Manifest) -> bool:
        return _pod_in_shard(shard, pod, node_names, own_groups.keys(), pod_groups.keys())

    if remembered is None:
        own_pods = {key: pod for key, pod in pods.items() if keep(pod)}
    else:
        changed = remembered.changed()
        own_pods = remembered.pods.kept(pods, keep, _pod_refers, changed)
    return ShardObjects(
        nodes=own_nodes,
        queues={key: queue for key, queue in queues.items() if shard.owns(queue)},
        pod_groups=own_groups,
        pods=own_pods,
    )


def _pod_in_shard(
    shard: Shard,
    pod: Manifest,
    node_names: Container[str],
    own_groups: Any,
    all_groups: Any,
) -> bool:
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return str(node) in node_names
    group = annotated_pod_group_key(pod)
    if group is not None and group in all_groups:
        return group in own_groups
    # Not grouped yet (or its group not seen yet): the pod's label is what its group will get.
    return shard.owns(pod)


def _pod_refers(pod: Manifest) -> Hashable:
    """What `_pod_in_shard` reads besides the pod: its node's, else its PodGroup's place."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return _on_node(str(node))
    group = annotated_pod_group_key(pod)
    return _in_group(group) if group is not None else None


def _on_node(name: str) -> tuple[str, str]:
    return ("node", name)


def _in_group(key: str) -> tuple[str, str]:
    return ("group", key)
