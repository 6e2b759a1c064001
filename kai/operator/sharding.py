"""The live scheduler's cut of the cluster to its shard (`kai run --node-pool`).

Every view a cycle takes of the watch cache goes through `shard_view`, so the
grouper, the snapshot, the binder, the reservations and the status writer all see
the same shard: nodes, queues and PodGroups of the pool, and the pods that belong
to them (`kai.api.shards`). Status is thus written only for the shard's own queues
and PodGroups, and two shards never write the same object's status.

One more cut: the grouper plans pods by their own label, but a group can take its
pool from the top owner's label. Such a plan is still written (the PodGroup must
exist for its shard to schedule it), but this shard leaves its pods alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kai.api.shards import KeptCut, Shard, shard_objects
from kai.grouping import PodGroupPlan

if TYPE_CHECKING:  # kai.operator.cache applies shard_view to every view it hands out
    from kai.operator.cache import ClusterView


def shard_view(view: ClusterView, shard: Shard, remembered: KeptCut | None = None) -> ClusterView:
    """The view as one shard sees it; priority classes and definitions are cluster-wide.
    `remembered`: the verdicts of the cut before (see `Verdicts`)."""
    cut = shard_objects(shard, view.nodes, view.queues, view.pod_groups, view.pods, remembered)
    return dataclasses.replace(
        view, nodes=cut.nodes, queues=cut.queues, pod_groups=cut.pod_groups, pods=cut.pods
    )


def foreign_plans(plans: Mapping[str, PodGroupPlan], shard: Shard) -> set[str]:
    """Pod keys whose planned group belongs to another pool."""
    return {key for key, plan in plans.items() if not shard.owns(plan.manifest)}


def without_pods(view: ClusterView, keys: set[str]) -> ClusterView:
    if not keys:
        return view
    return dataclasses.replace(
        view, pods={key: pod for key, pod in view.pods.items() if key not in keys}
    )
