"""Grouping rules for serving kinds: Deployment, Knative Service and LeaderWorkerSet.

Deployments and Knative Services are served pod by pod, each pod its own group
with the `inference` priority (kai-semantics §14.3; Knative's optional per-revision
gang is not modelled). A LeaderWorkerSet is one group per replica group
(`...-group-<i>`) of `size` pods, with sub-groups `leader` and `workers`; under the
LeaderReady startup policy a leader that is not yet placed is a gang of one.
"""

from __future__ import annotations

from kai.api.constants import INFERENCE_PRIORITY_CLASS
from kai.grouping.context import GroupingInput, spec_of, whole_number
from kai.grouping.plan import GroupDecision, SubGroupSpec, default_group_name

LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"


def per_pod_rule(inp: GroupingInput) -> GroupDecision:
    return GroupDecision(
        name=default_group_name(inp.pod), default_priority_class=INFERENCE_PRIORITY_CLASS
    )


def leaderworkerset_rule(inp: GroupingInput) -> GroupDecision:
    lws = inp.top
    template = spec_of(lws).get("leaderWorkerTemplate") or {}
    size = whole_number(inp, template.get("size"), "spec.leaderWorkerTemplate.size", 1, minimum=1)
    group_index = inp.pod_label(LWS_GROUP_INDEX_LABEL) or "0"
    is_leader = inp.pod_label(LWS_WORKER_INDEX_LABEL) in (None, "0")
    name = f"{default_group_name(lws)}-group-{group_index}"
    pod_subgroup = "leader" if is_leader else "workers"
    leader_first = spec_of(lws).get("startupPolicy") == "LeaderReady"
    unplaced = not (inp.pod.get("spec") or {}).get("nodeName")
    if leader_first and is_leader and unplaced:
        return GroupDecision(
            name=name,
            min_member=1,
            subgroups=(SubGroupSpec("leader", min_member=1),),
            pod_subgroup=pod_subgroup,
        )
    subgroups = [SubGroupSpec("leader", min_member=1)]
    if size > 1:
        subgroups.append(SubGroupSpec("workers", min_member=size - 1))
    return GroupDecision(
        name=name, min_member=size, subgroups=tuple(subgroups), pod_subgroup=pod_subgroup
    )
