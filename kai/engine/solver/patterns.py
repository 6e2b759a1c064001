"""Enumerate what one node (or one shared device) of a class can hold: its packing patterns.

A node's whole GPUs are a count, so any multiset of GPU sizes whose sum fits is a
valid way to fill it; a shared device is a memory bin, so any multiset of
fractions whose memory fits is valid. Counting nodes per pattern makes the GPU
dimension of bin packing exact, where per-class totals would let a 6-GPU and a
3-GPU pod "share" two half-empty 8-GPU nodes. Enumeration is capped; past the
cap the model falls back to per-class totals and the decoder repairs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

MAX_PATTERNS = 4000


def enumerate_patterns(
    sizes: Sequence[int], capacity: int, limit: int = MAX_PATTERNS
) -> list[tuple[int, ...]] | None:
    """Non-empty multisets (count vectors over item `sizes`, each > 0) with Σ count·size ≤ capacity.

    Returns None when there are more than `limit` of them. Memoised: many node classes
    share the same free GPUs and item sizes. The result must not be mutated.
    """
    return _enumerate(tuple(sizes), capacity, limit)


@functools.lru_cache(maxsize=1024)
def _enumerate(sizes: tuple[int, ...], capacity: int, limit: int) -> list[tuple[int, ...]] | None:
    patterns: list[tuple[int, ...]] = []
    counts = [0] * len(sizes)

    def extend(position: int, left: int) -> bool:
        if position == len(sizes):
            if any(counts):
                patterns.append(tuple(counts))
                if len(patterns) > limit:
                    return False
            return True
        size = sizes[position]
        most = left // size
        for count in range(most + 1):
            counts[position] = count
            if not extend(position + 1, left - count * size):
                return False
        counts[position] = 0
        return True

    if not sizes or not extend(0, capacity):
        return None if sizes else []
    return patterns
