"""Which GPU reservation pods hold a device of their own in the scheduler's view.

A shared device is held by one reservation pod (KAI's binder, kai-semantics §13.4)
that requests a whole `nvidia.com/gpu` and carries the device's `runai-gpu-group`.
While a pod sharing the device is on a node, the device is accounted through that
pod's group label, so its reservation pod is not counted again; one whose users are
gone still holds a GPU until it is collected. The live snapshot and `kai nodes` both
count devices by this rule, so the CLI shows the capacity the engine sees.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai.engine.model import Pod


def counted_reservations(reservations: Iterable[Pod], users: Iterable[Pod]) -> list[Pod]:
    """The reservation pods that occupy their node by themselves: those whose device no
    user pod on a node holds (a reservation pod's one group is its `runai-gpu-group`)."""
    in_use = {group for pod in users if pod.phase.occupies_node for group in pod.gpu_groups}
    return [pod for pod in reservations if not pod.gpu_groups or pod.gpu_groups[0] not in in_use]
