"""Which resources of a pod's requests or a node's allocatable are scalar resources, in
the engine's units (`kai.engine.scalars` says what they are and how they fit).

Everything but the resources the engine keeps apart: cpu and memory (its own fields),
`nvidia.com/gpu` (whole devices), and `pods` (a node's slots). Kubernetes names nothing
else without a domain but hugepages and ephemeral storage, so the rest are extended
resources, which kube-scheduler and KAI count the same way.

Two of them are GPUs to KAI's queues: a MIG slice counts its compute slices
(`kai.api.mig`), and an AMD device (`amd.com/gpu`) one GPU, as `nvidia.com/gpu` does.
kai places both as scalar resources, so an AMD pod goes only where AMD devices are free
(KAI counts them into one GPU count with NVIDIA's and could put one on the other's node).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from kai.api.constants import NVIDIA_GPU_RESOURCE
from kai.api.mig import mig_gpus
from kai.engine.scalars import MILLI, Scalars

AMD_GPU_RESOURCE = "amd.com/gpu"
KEPT_APART = frozenset({"cpu", "memory", "pods", NVIDIA_GPU_RESOURCE})


def asked_scalars(requests: Mapping[str, Fraction]) -> Scalars:
    """A pod's effective requests of scalar resources, in thousandths rounded up."""
    return _scalars(requests, math.ceil)


def allocatable_scalars(allocatable: Mapping[str, Fraction]) -> Scalars:
    """A node's allocatable scalar resources, in thousandths rounded down."""
    return _scalars(allocatable, math.floor)


def counted_gpus(amounts: Mapping[str, Fraction]) -> int:
    """The GPUs queues count for these scalar amounts: MIG compute slices and AMD devices."""
    return mig_gpus(amounts) + math.floor(amounts.get(AMD_GPU_RESOURCE, Fraction(0)))


def _scalars(amounts: Mapping[str, Fraction], rounded: Callable[[Fraction], int]) -> Scalars:
    found: list[tuple[str, int]] = []
    for name, amount in sorted(amounts.items()):
        if name in KEPT_APART or amount <= 0:
            continue
        value = rounded(amount * MILLI)
        if value > 0:
            found.append((name, value))
    return tuple(found)
