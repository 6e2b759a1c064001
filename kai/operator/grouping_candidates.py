"""Which pods of ours need a PodGroup, kept from one cycle to the next.

A pod needs one when it is not annotated yet, or when it is bound and names a group
the cluster lacks: its scheduler stopped before it wrote the group (see
`kai.operator.pod_grouper`). A busy cluster holds thousands of bound pods naming
their group, and judging each again every cycle was 4% of kai's CPU while pods came
one at a time beside 8,000. So a pod is judged when it changed, and a bound pod's
group is looked up again when a PodGroup of that name came, went or changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.changes import StoreChanges
from kai.api.constants import POD_GROUP_ANNOTATION, SCHEDULER_NAME

Manifest = Mapping[str, Any]


@dataclass(frozen=True)
class Candidate:
    """A pod of ours that needs a group, or may: one not annotated, or bound and naming one."""

    named: str | None  # "namespace/name" of the group a bound pod names; None: not annotated
    uid: str


def candidate(pod: Manifest, reservation_namespace: str) -> Candidate | None:
    """Whether the pod may need a group, and why; None when it never does as it is."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if not (
        spec.get("schedulerName") == SCHEDULER_NAME
        and metadata.get("namespace") != reservation_namespace
        and metadata.get("deletionTimestamp") is None
        and phase not in ("Succeeded", "Failed")
    ):
        return None
    uid = str(metadata.get("uid"))
    named = (metadata.get("annotations") or {}).get(POD_GROUP_ANNOTATION)
    if not named:
        return Candidate(None, uid)
    if spec.get("nodeName"):
        return Candidate(f"{metadata.get('namespace')}/{named}", uid)
    return None


class Candidates:
    """The pods that need a group as the cluster is now, updated from what changed."""

    def __init__(self, reservation_namespace: str) -> None:
        self._reservation_namespace = reservation_namespace
        self._pod_changes = StoreChanges()
        self._group_changes = StoreChanges()
        self._unnamed: dict[str, Candidate] = {}  # pod key -> a pod not annotated yet
        self._named: dict[str, Candidate] = {}  # pod key -> a bound pod naming a group
        self._naming: dict[str, set[str]] = {}  # group key -> the bound pods naming it
        self._orphans: dict[str, None] = {}  # the bound pods whose group the cluster lacks

    def needing(
        self, pods: Mapping[str, Manifest], pod_groups: Mapping[str, Manifest]
    ) -> list[tuple[str, Candidate]]:
        """Pod key and why, for every pod that needs a group: those not annotated, then
        the bound ones whose group is missing."""
        changed, gone = self._pod_changes.since_last(pods)
        for key in (*changed, *gone):
            self._forget(key)
        recheck: set[str] = set()
        for key in changed:
            found = candidate(pods[key], self._reservation_namespace)
            if found is None:
                continue
            if found.named is None:
                self._unnamed[key] = found
            else:
                self._named[key] = found
                self._naming.setdefault(found.named, set()).add(key)
                recheck.add(key)
        groups_changed, groups_gone = self._group_changes.since_last(pod_groups)
        for group in (*groups_changed, *groups_gone):
            recheck.update(self._naming.get(group, ()))
        for key in sorted(recheck):
            if self._named[key].named in pod_groups:
                self._orphans.pop(key, None)
            else:
                self._orphans[key] = None
        return [*self._unnamed.items(), *((key, self._named[key]) for key in self._orphans)]

    def _forget(self, key: str) -> None:
        self._unnamed.pop(key, None)
        self._orphans.pop(key, None)
        found = self._named.pop(key, None)
        if found is not None and found.named is not None:
            keys = self._naming[found.named]
            keys.discard(key)
            if not keys:
                del self._naming[found.named]
