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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


class PodVerdicts:
    """Which pods a shard kept at its last cut, for the next cut of the same objects.

    A live scheduler cuts its whole watch cache, thousands of pods, several times a
    cycle, and between two cuts few pods change. A pod's verdict depends on the pod and
    on the shard's nodes and PodGroups (and which PodGroups exist), so it is kept while
    the manifest is the same object (a watch cache replaces an object, never changes
    it) and those are the same.
    """

    def __init__(self) -> None:
        self._basis: tuple[frozenset[str], ...] | None = None
        self._verdicts: dict[str, tuple[Manifest, bool]] = {}

    def kept(
        self,
        pods: Mapping[str, Manifest],
        basis: tuple[frozenset[str], ...],
        keep: Callable[[Manifest], bool],
    ) -> dict[str, Manifest]:
        if basis != self._basis:
            self._basis, self._verdicts = basis, {}
        earlier, verdicts, kept = self._verdicts, {}, {}
        for key, pod in pods.items():
            entry = earlier.get(key)
            verdict = entry[1] if entry is not None and entry[0] is pod else keep(pod)
            verdicts[key] = (pod, verdict)
            if verdict:
                kept[key] = pod
        self._verdicts = verdicts
        return kept


def shard_objects(
    shard: Shard,
    nodes: Mapping[str, Manifest],
    queues: Mapping[str, Manifest],
    pod_groups: Mapping[str, Manifest],
    pods: Mapping[str, Manifest],
    remembered: PodVerdicts | None = None,
) -> ShardObjects:
    """Cut the cluster down to one shard. PodGroups are keyed "namespace/name".
    `remembered`: the verdicts of an earlier cut of these objects, kept up to date."""
    own_nodes = {key: node for key, node in nodes.items() if shard.owns(node)}
    node_names = {str((node.get("metadata") or {}).get("name")) for node in own_nodes.values()}
    own_groups = {key: group for key, group in pod_groups.items() if shard.owns(group)}

    def keep(pod: Manifest) -> bool:
        return _pod_in_shard(shard, pod, node_names, own_groups.keys(), pod_groups.keys())

    if remembered is None:
        own_pods = {key: pod for key, pod in pods.items() if keep(pod)}
    else:
        basis = (frozenset(node_names), frozenset(own_groups), frozenset(pod_groups))
        own_pods = remembered.kept(pods, basis, keep)
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
