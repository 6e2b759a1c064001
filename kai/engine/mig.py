"""MIG slices (NVIDIA Multi-Instance GPU): which nodes take which kind of GPU ask.

The GPU operator offers a MIG-partitioned device as slices, each a resource
`nvidia.com/mig-<compute>g.<memory>gb` (mixed strategy) or as `nvidia.com/gpu` itself
(single strategy). kai places the slices as scalar resources (`kai.engine.scalars`:
a pod fits where its slices are free) and counts them against queues by their compute
slices, as KAI does (`GetGpusQuota`: `mig-3g.40gb` counts 3 GPUs).

What this module adds is KAI's `PredicateByNodeResourcesType`
(`pkg/scheduler/api/node_info/node_info.go`): on a MIG-enabled node with the mixed
strategy only pods that ask for slices (or no GPU) may run; with the single strategy
only pods of whole devices (a slice shown as a device, which a share could not split);
a pod that asks for slices never goes to a node that is not MIG-enabled.
"""

from __future__ import annotations

from kai.engine.scalars import Scalars

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

WHOLE = "whole"
SHARED = "shared"
SLICES = "mig"
"""A pod's kind of GPU ask (`Placement.gpu_kind`); "" for a pod that asks for no GPU."""

MIXED = "mixed"
SINGLE = "single"
"""The strategies of a MIG-enabled node (`Node.mig`); any other value is KAI's "none"."""


def asks_for_slices(scalars: Scalars) -> bool:
    return any(name.startswith(MIG_RESOURCE_PREFIX) for name, _ in scalars)


def refusal(mig: str | None, gpu_kind: str) -> str | None:
    """Why a node of MIG mode `mig` (None: not MIG-enabled, else its strategy) refuses a
    pod of this kind of GPU ask, in words; None when it takes it."""
    if not gpu_kind:
        return None
    if mig is None:
        return "MIG slices asked of a node without MIG" if gpu_kind == SLICES else None
    if mig == SINGLE and gpu_kind != WHOLE:
        return "MIG strategy single: only pods of whole GPUs run here"
    if mig == MIXED and gpu_kind != SLICES:
        return "MIG strategy mixed: only pods of MIG slices run here"
    return None
