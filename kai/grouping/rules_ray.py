"""Grouping rules for KubeRay: RayCluster, RayJob and RayService (kai-semantics §14.3).

The gang is the head plus, per worker group, minReplicas (when > 0) else replicas,
times numOfHosts. Sub-groups are `head` and one per worker group. RayJob and
RayService take the cluster spec from the RayCluster they created when it is in
the owner chain, else from their own embedded spec. `ray.io/priority-class-name`
on the top owner overrides the priority class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.grouping.context import GroupingInput, spec_of, whole_number
from kai.grouping.plan import GroupDecision, SubGroupSpec, default_group_name
from kai.workloads.objects import labels_of

RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
_EMBEDDED_SPEC = {"RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}


def ray_rule(inp: GroupingInput) -> GroupDecision:
    cluster_spec, field = _cluster_spec(inp)
    subgroups = [SubGroupSpec(name="head", min_member=1)]
    for index, group in enumerate(cluster_spec.get("workerGroupSpecs") or []):
        group_field = f"{field}.workerGroupSpecs[{index}]"
        name = str(group.get("groupName") or "")
        if not name:
            raise inp.error(f"{group_field}.groupName", "is required")
        subgroups.append(
            SubGroupSpec(name=name.lower(), min_member=_group_size(inp, group, group_field))
        )
    if inp.pod_label(NODE_TYPE_LABEL) == "head":
        pod_subgroup: str | None = "head"
    else:
        pod_subgroup = (inp.pod_label(GROUP_LABEL) or "").lower() or None
    return GroupDecision(
        name=default_group_name(inp.top),
        min_member=sum(sub.min_member or 0 for sub in subgroups),
        subgroups=tuple(sub for sub in subgroups if sub.min_member),
        pod_subgroup=pod_subgroup,
        priority_class_override=labels_of(inp.top).get(RAY_PRIORITY_LABEL),
    )


def _cluster_spec(inp: GroupingInput) -> tuple[Mapping[str, Any], str]:
    kind = str(inp.top.get("kind"))
    if kind == "RayCluster":
        return spec_of(inp.top), "spec"
    for owner in inp.chain[:-1]:
        if owner.get("kind") == "RayCluster":
            return spec_of(owner), "spec"
    field = _EMBEDDED_SPEC[kind]
    embedded = spec_of(inp.top).get(field)
    if not isinstance(embedded, Mapping):
        raise inp.error(f"spec.{field}", "is required to size the Ray cluster")
    return embedded, f"spec.{field}"


def _group_size(inp: GroupingInput, group: Mapping[str, Any], field: str) -> int:
    hosts = whole_number(inp, group.get("numOfHosts"), f"{field}.numOfHosts", 1, minimum=1)
    minimum = whole_number(inp, group.get("minReplicas"), f"{field}.minReplicas", 0)
    replicas = whole_number(inp, group.get("replicas"), f"{field}.replicas", 1)
    return (minimum if minimum > 0 else replicas) * hosts
