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

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

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
    verdict depends on the object and on the `basis` (for a pod: the shard's nodes and
    PodGroups, and which PodGroups exist), so it is kept while the object is the same
    object (a watch cache replaces an object, never changes it) and the basis is the
    same; only the objects that changed since the last cut are judged, found by identity.
    The cut keeps the order of the objects' first sighting, which the cache's order is
    but for an object judged out, then in again (no reader depends on the order).
    """

    def __init__(self) -> None:
        self._basis: Hashable = None
        self._seen: dict[str, Manifest] = {}  # the objects of the last cut (kept alive)
        self._kept: dict[str, Manifest] = {}

    def kept(
        self, objects: Mapping[str, Manifest], basis: Hashable, keep: Callable[[Manifest], bool]
    ) -> dict[str, Manifest]:
        if basis != self._basis:
            self._basis, self._seen, self._kept = basis, {}, {}
        seen, kept = self._seen, dict(self._kept)
        for key in seen.keys() - objects.keys():
            kept.pop(key, None)
        for key, obj in objects.items():
            if seen.get(key) is not obj:
                if keep(obj):
                    kept[key] = obj
                else:
                    kept.pop(key, None)
        self._seen, self._kept = dict(objects), kept
        return dict(kept)


@dataclass
class KeptCut:
    """The verdicts of a shard's last cut of a cluster, for its next cut (see `Verdicts`)."""

    pod_groups: Verdicts = field(default_factory=Verdicts)
    pods: Verdicts = field(default_factory=Verdicts)


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
    own_nodes = {key: node for key, node in nodes.items() if shard.owns(node)}
    node_names = {str((node.get("metadata") or {}).get("name")) for node in own_nodes.values()}
    if remembered is None:
        own_groups = {key: group for key, group in pod_groups.items() if shard.owns(group)}
    else:
        own_groups = remembered.pod_groups.kept(pod_groups, None, shard.owns)

    def keep(pod: Manifest) -> bool:
        return _pod_in_shard(shard, pod, node_names, own_groups.keys(), pod_groups.keys())

    if remembered is None:
        own_pods = {key: pod for key, pod in pods.items() if keep(pod)}
    else:
        basis = (frozenset(node_names), frozenset(own_groups), frozenset(pod_groups))
        own_pods = remembered.pods.kept(pods, basis, keep)
    return ShardObjects(
        nodes=own_nodes,
        queues={key: queue for key, queue in queues.items() if shard.owns(queue)},
        pod_groups=own_groups,
        pods=own_pods,
    )


def _pod_in_shard(
    shard: Shard,
    pod: Manifest,
    node_names: set[str],
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
