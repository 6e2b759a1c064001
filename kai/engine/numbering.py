"""Numbers for values that repeat: the engine's caches key on small ints, not on tuples.

Why: the fragmentation measure and the eligibility rejections both number what they
meet (node states, GPU asks, placements) so that sets and sums can be keyed by ints;
one class does it for all of them.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Numbering(Generic[T]):
    """Numbers things in the order first seen; equal things get the same number."""

    def __init__(self) -> None:
        self._numbers: dict[T, int] = {}
        self.items: list[T] = []

    def __call__(self, item: T) -> int:
        number = self._numbers.get(item)
        if number is None:
            number = self._numbers[item] = len(self.items)
            self.items.append(item)
        return number

    def __len__(self) -> int:
        return len(self.items)
