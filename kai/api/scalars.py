"""Which resources of a pod's requests or a node's allocatable are scalar resources, in
the engine's units (`kai.engine.scalars` says what they are and how they fit).

Everything but the resources the engine keeps apart: cpu and memory (its own fields),
`nvidia.com/gpu` (whole devices), and `pods` (a node's slots). Kubernetes names nothing
else without a domain but hugepages and ephemeral storage, so the rest are extended
resources, which kube-scheduler and KAI count the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction

from kai.api.constants import NVIDIA_GPU_RESOURCE
from kai.engine.scalars import MILLI, Scalars

KEPT_APART = frozenset({"cpu", "memory", "pods", NVIDIA_GPU_RESOURCE})


def asked_scalars(requests: Mapping[str, Fraction]) -> Scalars:
    """A pod's effective requests of scalar resources, in thousandths rounded up."""
    return _scalars(requests, math.ceil)


def allocatable_scalars(allocatable: Mapping[str, Fraction]) -> Scalars:
    """A node's allocatable scalar resources, in thousandths rounded down."""
    return _scalars(allocatable, math.floor)


def _scalars(amounts: Mapping[str, Fraction], rounded: Callable[[Fraction], int]) -> Scalars:
    found: list[tuple[str, int]] = []
    for name, amount in sorted(amounts.items()):
        if name in KEPT_APART or amount <= 0:
            continue
        value = rounded(amount * MILLI)
        if value > 0:
            found.append((name, value))
    return tuple(found)
