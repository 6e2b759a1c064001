"""The three resources the engine divides and accounts: GPUs, CPU and memory.

Every amount is an exact `Fraction` so that sums of GPU fractions compare exactly
against quotas and limits (KAI#2209 is a float bug we do not reproduce). Units are
the engine's everywhere: GPUs in devices, CPU in millicores, memory in bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

ResourceName = Literal["gpu", "cpu", "memory"]
RESOURCE_NAMES: tuple[ResourceName, ...] = ("gpu", "cpu", "memory")
ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of each resource: gpu in devices, cpu in millicores, memory in bytes."""

    gpu: Fraction = ZERO
    cpu: Fraction = ZERO
    memory: Fraction = ZERO

    @classmethod
    def of(
        cls, gpu: Fraction | int = 0, cpu: Fraction | int = 0, memory: Fraction | int = 0
    ) -> Resources:
        return cls(Fraction(gpu), Fraction(cpu), Fraction(memory))

    def get(self, name: ResourceName) -> Fraction:
        value: Fraction = getattr(self, name)
        return value

    def items(self) -> Iterator[tuple[ResourceName, Fraction]]:
        for name in RESOURCE_NAMES:
            yield name, self.get(name)

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            _plus(self.gpu, other.gpu), _plus(self.cpu, other.cpu), _plus(self.memory, other.memory)
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            _minus(self.gpu, other.gpu),
            _minus(self.cpu, other.cpu),
            _minus(self.memory, other.memory),
        )

    def scaled(self, factor: int | Fraction) -> Resources:
        return Resources(self.gpu * factor, self.cpu * factor, self.memory * factor)

    def fits_in(self, other: Resources) -> bool:
        """True when every component is at most the other's."""
        return self.gpu <= other.gpu and self.cpu <= other.cpu and self.memory <= other.memory

    def is_zero(self) -> bool:
        return not (self.gpu or self.cpu or self.memory)

    def to_json(self) -> dict[str, float | int]:
        """Output units of the `kai simulate` contract: gpu may be fractional, cpu and memory whole."""
        return {"gpu": _gpu_number(self.gpu), "cpu": int(self.cpu), "memory": int(self.memory)}


NO_RESOURCES = Resources()
"""Nothing of any resource: what a queue or node without an entry holds. Resources are
immutable, so one object serves every lookup (a frozen dataclass is slow to build, and a
queue ranking recognises the same holding by identity)."""


def _plus(a: Fraction, b: Fraction) -> Fraction:
    """a + b, with whole numbers (nearly every amount) added as ints: `Fraction.__add__`
    dispatches and normalises in Python, and sums of Resources were a sixth of a cycle."""
    if a.denominator == 1 == b.denominator:
        return Fraction(a.numerator + b.numerator)
    return a + b


def _minus(a: Fraction, b: Fraction) -> Fraction:
    if a.denominator == 1 == b.denominator:
        return Fraction(a.numerator - b.numerator)
    return a - b


class ResourceSum:
    """Adds many `Resources` exactly and fast: numerators summed per denominator as ints,
    one `Fraction` per component at the end. `Fraction + Fraction` normalises at every
    step (a gcd and a new object); a cycle sums every running pod of a cluster this way,
    and nearly all of the amounts are whole numbers."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: tuple[dict[int, int], dict[int, int], dict[int, int]] = ({}, {}, {})

    def add(self, amount: Resources) -> None:
        gpu, cpu, memory = self._parts  # unrolled: this runs once per running pod per cycle
        value = amount.gpu
        gpu[value.denominator] = gpu.get(value.denominator, 0) + value.numerator
        value = amount.cpu
        cpu[value.denominator] = cpu.get(value.denominator, 0) + value.numerator
        value = amount.memory
        memory[value.denominator] = memory.get(value.denominator, 0) + value.numerator

    def remove(self, amount: Resources) -> None:
        """Take out an amount added before: the sum stays exact."""
        for parts, value in zip(self._parts, (amount.gpu, amount.cpu, amount.memory), strict=True):
            parts[value.denominator] = parts.get(value.denominator, 0) - value.numerator

    def total(self) -> Resources:
        gpu, cpu, memory = (_exact_total(parts) for parts in self._parts)
        return Resources(gpu, cpu, memory)


def exact_sum(values: Iterable[Fraction]) -> Fraction:
    """The sum of these amounts, as `ResourceSum` adds one component: a cycle sums every
    placement's GPUs several times, and `sum` over Fractions was a tenth of a 5,000-node
    greedy pass."""
    parts: dict[int, int] = {}
    for value in values:
        parts[value.denominator] = parts.get(value.denominator, 0) + value.numerator
    return _exact_total(parts)


def _exact_total(parts: dict[int, int]) -> Fraction:
    """The sum of numerators over their denominators; whole amounts alone are one int."""
    if len(parts) == 1 and 1 in parts:
        return Fraction(parts[1])
    return sum((Fraction(n, d) for d, n in parts.items()), ZERO)


def _gpu_number(value: Fraction) -> float | int:
    return int(value) if value.denominator == 1 else float(value)


def with_value(resources: Resources, name: ResourceName, value: Fraction) -> Resources:
    """A copy of `resources` with one component replaced."""
    values = dict(resources.items())
    values[name] = value
    return Resources(values["gpu"], values["cpu"], values["memory"])
