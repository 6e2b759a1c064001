"""What the GPU-sharing upkeep reads of the pods each cycle, kept up to date by the pods that changed.

After each cycle the scheduler collects reservation pods no user holds and publishes
devices to the sharing pods whose reservation pods have published theirs
(`kai.operator.gpu_sharing`). Both read every pod of the cluster: which are
reservation pods, which shared devices the user pods on nodes hold, which pods still
wait for their devices. Read anew every cycle, that was a sixth of kai's time while
pods came one at a time beside 8,000; kept here per pod, only the pods that changed
since the last cycle (`StoreChanges`) are read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api.changes import StoreChanges
from kai.api.pods import gpu_groups
from kai.operator.gpu_sharing import holds_a_device, waits_for_devices

Manifest = Mapping[str, Any]


@dataclass(frozen=True)
class _PodFacts:
    reservation: bool  # a reservation pod holding a device
    holds: tuple[str, ...]  # the shared devices a user pod on a node holds
    waits_for_devices: bool  # a sharing pod on a node whose devices are not published yet


class SharingFacts:
    """The reservation pods, the devices in use and the pods waiting for their devices."""

    def __init__(self, reservation_namespace: str) -> None:
        self._namespace = reservation_namespace
        self._prefix = f"{reservation_namespace}/"
        self._changes = StoreChanges()
        self._facts: dict[str, _PodFacts] = {}
        self._in_use: Counter[str] = Counter()
        self.reservations: dict[str, Manifest] = {}
        """Reservation pods by key."""
        self.waiting: dict[str, Manifest] = {}
        """Sharing pods on a node whose devices are not published yet, by key."""

    @property
    def in_use(self) -> set[str]:
        """The shared devices (groups) held by user pods that occupy a node."""
        return set(self._in_use)

    def update(self, pods: Mapping[str, Manifest]) -> None:
        changed, gone = self._changes.since_last(pods)
        for key in (*changed, *gone):
            self._forget(key)
        for key in changed:
            self._learn(key, pods[key])

    def _forget(self, key: str) -> None:
        facts = self._facts.pop(key, None)
        if facts is None:
            return
        self.reservations.pop(key, None)
        self.waiting.pop(key, None)
        self._in_use.subtract(facts.holds)
        for group in facts.holds:
            if not self._in_use[group]:
                del self._in_use[group]

    def _learn(self, key: str, pod: Manifest) -> None:
        waits = waits_for_devices(pod)
        if key.startswith(self._prefix):
            facts = _PodFacts(holds_a_device(key, pod, self._namespace), (), waits)
        else:
            phase = (pod.get("status") or {}).get("phase")
            on_node = bool((pod.get("spec") or {}).get("nodeName"))
            labels = (pod.get("metadata") or {}).get("labels") or {}
            holds = gpu_groups(labels) if on_node and phase not in ("Succeeded", "Failed") else ()
            facts = _PodFacts(False, holds, waits)
        self._facts[key] = facts
        if facts.reservation:
            self.reservations[key] = pod
        if facts.waits_for_devices:
            self.waiting[key] = pod
        self._in_use.update(facts.holds)
