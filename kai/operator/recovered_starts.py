"""The start of a group written after a restart, read from when the API server bound its pods.

Why: while a burst lasts, kai binds a new group's pods before it creates the group, and
the create carries the group's `last-start-timestamp`, which min-runtime counts from
(kai.operator.group_writes). A scheduler stopped in between leaves bound pods naming a
group the cluster lacks; the next one plans and writes the group (kai.operator.pod_grouper),
and without this its start would be lost and min-runtime would not protect it. The
API server keeps the moment of each bind: a binding sets the pod's PodScheduled
condition, its lastTransitionTime then. A gang starts when its minMember-th pod is bound
(kai.engine.evictions.stamps), so that pod's bind is the start; a group with fewer pods
bound than its minimum has not started and gets none.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kai.api.fields import parse_timestamp
from kai.api.podgroups import LAST_START_ANNOTATION, stamp_annotations
from kai.grouping.plan import PodGroupPlan


def with_recovered_starts(
    plans: Mapping[str, PodGroupPlan], pods: Mapping[str, Mapping[str, Any]]
) -> dict[str, PodGroupPlan]:
    """The plans (pod key -> plan), those of groups whose planned pods are bound already
    carrying the group's start in their manifest."""
    bound_at: dict[str, list[datetime]] = {}
    for key, plan in plans.items():
        moment = _bound_at(pods.get(key))
        if moment is not None:
            bound_at.setdefault(plan.key, []).append(moment)
    if not bound_at:  # the usual cycle: every pod it plans is new
        return dict(plans)
    starts: dict[str, str] = {}
    for plan in plans.values():
        times = bound_at.get(plan.key)
        needed = max(1, int(plan.manifest.get("spec", {}).get("minMember") or 1))
        if plan.key not in starts and times is not None and len(times) >= needed:
            start = stamp_annotations(sorted(times)[needed - 1], None, None)
            starts[plan.key] = str(start[LAST_START_ANNOTATION])
    return {
        key: _with_start(plan, starts[plan.key]) if plan.key in starts else plan
        for key, plan in plans.items()
    }


def _bound_at(pod: Mapping[str, Any] | None) -> datetime | None:
    """When the API server bound the pod (its PodScheduled condition), if it is bound."""
    if pod is None or not (pod.get("spec") or {}).get("nodeName"):
        return None
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            try:
                return parse_timestamp(condition.get("lastTransitionTime"))
            except ValueError:
                return None
    return None


def _with_start(plan: PodGroupPlan, start: str) -> PodGroupPlan:
    annotations = (plan.manifest.get("metadata") or {}).get("annotations") or {}
    if LAST_START_ANNOTATION in annotations:  # one the plan has already stands
        return plan
    return plan.with_group_annotations({LAST_START_ANNOTATION: start})
