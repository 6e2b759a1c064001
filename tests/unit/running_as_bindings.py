"""Turn a snapshot's running pods into proposed bindings, so the validator checks them.

`validate(snapshot, [])` checks nothing: only nodes and gangs a binding touches are the
engine's responsibility. To check that a generated cluster's running pods are sound
(they fit their nodes and devices, their gangs are whole, their queues within limits),
the validator is shown the same cluster with those pods pending and asked to bind them
where they run.
"""

from __future__ import annotations

import dataclasses

from kai.engine.model import PodPhase, Snapshot
from kai.engine.validator import ProposedBinding


def running_as_bindings(snapshot: Snapshot) -> tuple[Snapshot, list[ProposedBinding]]:
    """The snapshot before its Bound pods were bound, and the bindings that bind them."""
    bindings = [
        ProposedBinding(pod.key, pod.node, pod.gpu_groups)
        for pod in snapshot.pods
        if pod.phase is PodPhase.BOUND and pod.node is not None and pod.scheduler_is_ours
    ]
    rebound = {binding.pod for binding in bindings}
    pods = tuple(
        dataclasses.replace(pod, phase=PodPhase.PENDING, node=None, gpu_groups=())
        if pod.key in rebound
        else pod
        for pod in snapshot.pods
    )
    return dataclasses.replace(snapshot, pods=pods), bindings
