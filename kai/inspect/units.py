"""Amounts as a person reads them in a table.

GPUs as decimal devices, CPU as cores (or millicores when not whole), memory with the
largest binary or decimal unit that divides it, shares of a device to three places,
and -1 as `unlimited`, KAI's spelling of no cap. Documents (`-o json|yaml`) carry the
numbers themselves in the engine's units instead (`Resources.to_json`).
"""

from __future__ import annotations

from fractions import Fraction

from kai.engine.model import UNLIMITED, GpuRequest
from kai.engine.resources import ResourceName, Resources

NOT_KNOWN = "-"
UNLIMITED_TEXT = "unlimited"
_MEMORY_UNITS = (
    ("Ti", 2**40),
    ("T", 10**12),
    ("Gi", 2**30),
    ("G", 10**9),
    ("Mi", 2**20),
    ("M", 10**6),
    ("Ki", 2**10),
    ("k", 10**3),
)


def decimal(value: Fraction) -> str:
    """A whole number as it is, anything else to at most three decimal places."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.3f}".rstrip("0").rstrip(".")


def amount(name: ResourceName, value: Fraction | None) -> str:
    """One resource's amount in engine units (devices, millicores, bytes), for a table."""
    if value is None:
        return NOT_KNOWN
    if value == UNLIMITED:
        return UNLIMITED_TEXT
    if name == "gpu":
        return decimal(value)
    if name == "cpu":
        return decimal(value / 1000) if value % 1000 == 0 else f"{decimal(value)}m"
    for unit, size in _MEMORY_UNITS:
        if value >= size and value % size == 0:
            return f"{value // size}{unit}"
    return decimal(value)


def resource_amount(name: ResourceName, value: Resources | None) -> str:
    return amount(name, None if value is None else value.get(name))


def gpu_ask(gpu: GpuRequest) -> str:
    """What a pod asks of GPUs: `2`, `0.5`, `20000MiB`, `0.5 x2` (a share of two devices);
    MIG slices as the GPUs they count as."""
    if gpu.whole or gpu.scalar_gpus:
        return str(gpu.whole + gpu.scalar_gpus)
    if gpu.portion:
        each = decimal(gpu.portion)
    elif gpu.memory_mib:
        each = f"{gpu.memory_mib}MiB"
    else:
        return "0"
    return each if gpu.devices == 1 else f"{each} x{gpu.devices}"
