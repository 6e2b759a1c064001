"""Resolve a pod's controller-owner chain from a set of objects, as the pod grouper walks it.

The live adapter reads owners from the API server; the simulator and `kai workload
describe -f` have them in memory (the objects `expand_workload` returns). Either
way the chain runs from the pod's direct controller up to the top owner, and more
than one controller owner at any step is an error (kai-semantics §14.2). An owner
that is not among the objects ends the chain, as a Forbidden read does live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kai.grouping.plan import GroupingError
from kai.workloads.objects import controller_owner_uid, name_of, object_uid


def resolve_owner_chain(
    pod: Mapping[str, Any], objects: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The owners of `pod` found in `objects`, direct owner first, top owner last."""
    by_uid = {object_uid(obj): obj for obj in objects}
    chain: list[Mapping[str, Any]] = []
    current = pod
    seen = {object_uid(pod)}
    while True:
        owners = controller_owner_uid(current)
        if len(owners) > 1:
            raise GroupingError(
                f"{current.get('kind')} {name_of(current)} has {len(owners)} owners; one is allowed"
            )
        if not owners or owners[0] not in by_uid or owners[0] in seen:
            return chain
        seen.add(owners[0])
        current = by_uid[owners[0]]
        chain.append(current)
