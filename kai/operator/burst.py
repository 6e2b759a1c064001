"""How much of a burst of new pods one cycle takes on: the first `limit` in line, whole owners.

Everything a cycle takes on goes through every step before anything of it is
bound: planned (owner chain, top-owner annotation), laid into the snapshot,
solved (its PodGroup is written before or after the binds, or after the burst:
kai.operator.group_writes). With 5,000 new pods one cycle took 24-57 s and bound
nothing before it ended. So a cycle groups at most `limit` new pods and the rest
wait for the following cycles, which start at once (the loop is told the burst
is not over). A pod that waits has no PodGroup yet, so it is not in any queue
yet: it is waiting to be grouped, as it would in KAI while its pod grouper
catches up, and it gets its reason from the engine in the cycle that groups it.

The bound grows once the burst is under way: `limit` for its first cycle, then
`BURST_GROWTH` x `limit` for each later one (500, 8,000, 8,000, ...). The first
cycle is kept small so that the first binds go out soon. The second plans while
the first is binding, and each cycle costs something whatever its size (cutting
the watch cache, the snapshot of every pod, the engine's pass over them,
contending with the binds for the interpreter), so fewer, larger later cycles
leave the binds fewer stretches with a cycle planning beside them. A 5,000-pod
burst (`bench/e2e.py`, kai only, a fresh control plane each, interleaved) took
8.86 s median with a fixed 500 (10 cycles), 8.07 s with 1,000 (5) and 7.91 s with
2,000 (3, the first bind 0.7 s later than with 500); growing by 2 up to 4x (500,
1,000, 2,000, 1,500) 7.54 s median of six; by 4 up to 8x (500, 2,000, 2,500)
7.61 s median of five against 7.18 of nine for 500 then the rest (4,500). That
second cycle is decided in about a second, while the first cycle's 500 binds go
out, and its binds then go out at 1,050/s, the bare client's rate, against
700-930/s when the rest took two cycles. With 10,000 pods (500, 8,000, 1,500
against 500, 2,000, 4,000, 3,500) two rounds were even: 14.79 and 13.67 s against
13.46 and 14.17.

Who is first: the pod's priority (higher first, as KAI's job order), then the
oldest, then by name, so a burst is taken on in the order the engine would offer
it and a later cycle never overtakes an earlier pod of the same priority. Pods
of one controller (a Job's, a PyTorchJob's, a StatefulSet's) are taken
together, so a gang is not split between cycles by this bound; so one Job of
thousands of pods is still one cycle. A ReplicaSet's are not: a Deployment's
pods get a PodGroup each and a bare ReplicaSet's share one of minimum 1, so
neither is a gang, and a Deployment scaled to thousands is taken `limit` at a
time. A gang spread over several controllers may be split, and then waits
whole (the engine never binds a gang below its minimum; the group's reason
says pods are missing) until the next cycle groups its other pods.

While a burst lasts, a cycle writes the status of the groups that wait, whole or
in part (their reasons), but not of those it scheduled whole: that would be one more
write per pod on the API server the binds are waiting for. The cycle after the
burst writes them, as every cycle compares every group's status with the
cluster's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai.engine.group_decision import GroupDecision
from kai.operator.config import BURST_GROWTH

Waiting = tuple[str, Mapping[str, Any]]
"""A pod that needs a PodGroup: its key ("namespace/name") and the pod."""


def cycle_bound(limit: int, continued: int) -> int:
    """New pods a cycle takes on when the burst has already lasted `continued` cycles:
    `limit` in its first, `BURST_GROWTH` x `limit` in each later one (`limit` <= 0: no
    bound)."""
    if limit <= 0 or continued == 0:
        return limit
    return limit * BURST_GROWTH


def first_in_line(waiting: Sequence[Waiting], limit: int) -> tuple[list[Waiting], int]:
    """The pods this cycle groups, first in line first, and how many are left for later.

    `limit` <= 0 means no bound. Every pod of a controller one taken pod belongs to
    is taken too, so the result may hold a few more than `limit`.
    """
    if limit <= 0 or len(waiting) <= limit:
        return list(waiting), 0
    in_line = sorted(waiting, key=_place_in_line)
    owners = {_controller(item) for item in in_line[:limit]}
    taken = [
        item for index, item in enumerate(in_line) if index < limit or _controller(item) in owners
    ]
    return taken, len(waiting) - len(taken)


def _place_in_line(item: Waiting) -> tuple[int, str, str]:
    key, pod = item
    priority = int((pod.get("spec") or {}).get("priority") or 0)
    created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
    return (-priority, created, key)  # RFC 3339 UTC timestamps sort as text


def _controller(item: Waiting) -> str:
    """The uid of the controller whose pods are taken together, else the pod's own key."""
    key, pod = item
    for reference in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("controller") and reference.get("kind") != "ReplicaSet":
            return str(reference.get("uid") or key)
    return key


def statuses_to_write(
    decisions: Mapping[str, GroupDecision], burst_continues: bool
) -> Mapping[str, GroupDecision]:
    """The decisions whose PodGroup status this cycle writes: while a burst continues (see
    above) only those with a reason (the group or some of its pods wait), all otherwise."""
    if not burst_continues:
        return decisions
    return {key: decision for key, decision in decisions.items() if decision.reason}
