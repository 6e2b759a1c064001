"""Packing patterns: every multiset of item sizes that fits one node or one device."""

from __future__ import annotations

from kai.engine.solver.patterns import enumerate_patterns


def test_patterns_are_the_multisets_that_fit() -> None:
    patterns = enumerate_patterns([3, 6], 8)
    assert patterns is not None
    assert sorted(patterns) == [(0, 1), (1, 0), (2, 0)]


def test_all_gpu_sizes_on_an_8_gpu_node_give_the_partitions_of_1_to_8() -> None:
    # Partitions of n for n = 1..8: 1, 2, 3, 5, 7, 11, 15, 22.
    patterns = enumerate_patterns(list(range(1, 9)), 8)
    assert patterns is not None and len(patterns) == 66


def test_too_many_patterns_means_none() -> None:
    assert enumerate_patterns([1, 2, 3, 4, 5], 40, limit=100) is None


def test_no_items_means_no_patterns() -> None:
    assert enumerate_patterns([], 8) == []
