"""The snapshot after a cycle's binds, for the status and metrics that describe it.

The status writer and the queues' shares read the cluster as the cycle left it: the
snapshot the engine decided on, with the pods whose binds succeeded on their nodes
(not those the engine only proposed). Both keep what they derive per object and are
told what changed since the last such snapshot (`kai.engine.snapshot_changes`): the
pods bound last cycle as the builder now has them, what the builder says changed
since its last snapshot, and the pods bound now.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kai.engine.model import Pod, PodPhase, Snapshot
from kai.engine.snapshot_changes import Changes, SnapshotChanges
from kai.operator.snapshot import Assumed


class AfterBinds:
    """The snapshots after each cycle's binds, in order, each telling what changed."""

    def __init__(self) -> None:
        self._undo: Changes[Pod] | None = None
        """From the last after-binds snapshot's pods back to the pods it was made from."""

    def snapshot(self, decided: Snapshot, bound: Mapping[str, Assumed]) -> Snapshot:
        """`decided` with the pods in `bound` on their nodes, telling what changed since
        the last snapshot made here (a reader checks that the account starts there)."""
        binds = _with_binds(decided.pods, bound)
        told = decided.changes or SnapshotChanges()
        pods = told.pods
        if pods is not None and self._undo is not None:
            pods = self._undo.then(pods)
        if pods is not None and binds is not None:
            pods = pods.then(binds)
        self._undo = binds.reversed() if binds is not None else None
        return dataclasses.replace(
            decided,
            pods=binds.now if binds is not None else decided.pods,
            changes=SnapshotChanges(pods, told.pod_groups, told.nodes),
        )


def _with_binds(pods: tuple[Pod, ...], bound: Mapping[str, Assumed]) -> Changes[Pod] | None:
    """The pods with those bound on their nodes, from `pods`; None when none was bound."""
    if not bound:
        return None
    changed: dict[str, tuple[Pod | None, Pod | None]] = {}
    after: list[Pod] = []
    for pod in pods:
        at = bound.get(pod.key)
        placed = (
            pod
            if at is None
            else dataclasses.replace(
                pod, phase=PodPhase.BOUND, node=at.node, gpu_groups=at.gpu_groups
            )
        )
        if placed is not pod:
            changed[pod.key] = (pod, placed)
        after.append(placed)
    return Changes(pods, tuple(after), changed)
