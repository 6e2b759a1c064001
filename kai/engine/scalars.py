"""Resources a node counts besides GPUs, CPU and memory: extended resources (an RDMA
device, `amd.com/gpu`), hugepages, ephemeral storage.

KAI keeps them beside its three as "scalar resources"
(`pkg/scheduler/api/resource_info/base_resources.go`, `LessEqual`): a pod fits a node only
if each one it asks for is free there, a node that lists none has none, and they count
toward no queue. kube-scheduler's NodeResourcesFit filter decides alike. Without them kai
bound a pod that asks for an RDMA device onto a node that has none, and the kubelet
refused it.

Amounts are whole thousandths of a unit (a Kubernetes quantity's milli value): asks
rounded up, allocatable down, so that sums compare exactly. The greedy pass, the
eviction actions and the explanations read this module; the CP-SAT allocation model counts
them per node class (`kai.engine.solver.shapes.NodeClass.scalars_total`), and its decoder
per node.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

Scalars = tuple[tuple[str, int], ...]
"""Per resource name, an amount in thousandths: sorted by name, no zeros."""

MILLI = 1000


def shortage(asks: Scalars, free: Mapping[str, int]) -> tuple[str, int, int] | None:
    """The first resource asked for that is not free enough: (name, asked, free); else None."""
    for name, amount in asks:
        have = free.get(name, 0)
        if amount > have:
            return name, amount, have
    return None


def take(free: MutableMapping[str, int], asks: Scalars) -> None:
    for name, amount in asks:
        free[name] = free.get(name, 0) - amount


def give_back(free: MutableMapping[str, int], asks: Scalars) -> None:
    for name, amount in asks:
        free[name] = free.get(name, 0) + amount


def shortage_message(asks: Scalars, free: Mapping[str, int]) -> str | None:
    """Why the asks do not fit in what is free, in the resource's own units; else None."""
    short = shortage(asks, free)
    if short is None:
        return None
    name, amount, have = short
    return f"insufficient {name} (needs {in_units(name, amount)}, free {in_units(name, have)})"


def in_units(name: str, thousandths: int) -> str:
    """An amount as a quantity would write it: bytes of storage or hugepages with the
    largest binary suffix that keeps them whole (200Gi), anything else in whole units when
    whole, else in decimals."""
    whole, rest = divmod(thousandths, MILLI)
    if rest:
        return f"{thousandths / MILLI:g}"
    if whole > 0 and (name in _IN_BYTES or name.startswith("hugepages-")):
        for power, suffix in reversed(_BINARY_SUFFIXES):
            if whole % 1024**power == 0:
                return f"{whole // 1024**power}{suffix}"
    return str(whole)


_IN_BYTES = frozenset({"ephemeral-storage", "storage"})
_BINARY_SUFFIXES = ((1, "Ki"), (2, "Mi"), (3, "Gi"), (4, "Ti"), (5, "Pi"), (6, "Ei"))
