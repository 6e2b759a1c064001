"""What a gang is told when pods placed this cycle are taken back before they bind.

KAI's eviction actions see the tasks its allocate placed or its consolidation pipelined
in the same session as running, and may take them for a preemptor; those tasks never
bind. kai's preempt takes the allocation's placements, and reclaim and preempt what
consolidation pipelined (`kai.engine.evictions.gangs` says why no more): a pod taken back
is neither bound nor evicted (nothing started, nothing is deleted), and its gang's
decision says which action took it, for whom and under which rule. A gang left with
nothing running or bound waits; one that still runs says why its taken pods wait.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

from kai.engine.evictions.decisions import Eviction
from kai.engine.greedy import UNSCHEDULABLE
from kai.engine.group_decision import GroupDecision


def taken_back_decisions(
    taken_back: Sequence[Eviction],
    decisions: Mapping[str, GroupDecision],
    holding: Collection[str],
) -> dict[str, GroupDecision]:
    """The new decisions of the gangs that lost pods placed this cycle. `decisions`: the
    allocation's, by PodGroup; `holding`: the PodGroups that still run or bind a pod once
    the cycle's evictions and take-backs are done."""
    by_group: dict[str, list[Eviction]] = defaultdict(list)
    for record in taken_back:
        by_group[record.group].append(record)
    changed: dict[str, GroupDecision] = {}
    for key, records in sorted(by_group.items()):
        decision = decisions[key]
        cause = _cause(records)
        if key not in holding:
            changed[key] = GroupDecision(key, decision.queue, False, UNSCHEDULABLE, cause)
        elif decision.reason:  # some of its pods already wait, and say why
            changed[key] = dataclasses.replace(decision, message=f"{decision.message}; {cause}")
        else:
            changed[key] = dataclasses.replace(
                decision, reason=UNSCHEDULABLE, message=f"the gang runs; {cause}"
            )
    return changed


def _cause(records: Sequence[Eviction]) -> str:
    takers = sorted({(r.action.value, r.preemptor or "", r.rule) for r in records})
    said = ", ".join(f"{action} for {preemptor} ({rule})" for action, preemptor, rule in takers)
    return f"{len(records)} pod(s) placed this cycle were taken back before binding by {said}"
