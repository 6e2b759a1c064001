"""Careless edits of manifests, drawn by hypothesis, for the tests that bad input gets a clear
error: a field deleted, or set to one of the caller's odd values."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import strategies as st


def value_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key and index path below `value`, outermost first."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        items = ()
    for key, child in items:
        yield from value_paths(child, (*prefix, key))


def edit_carelessly(
    draw: st.DrawFn,
    documents: Sequence[Any],
    odd_values: Sequence[Any],
    kept: frozenset[str] = frozenset(),
) -> None:
    """Change one to three values of the documents in place; top-level keys in `kept` stay."""
    for _ in range(draw(st.integers(1, 3))):
        document = draw(st.sampled_from(documents))
        paths = [path for path in value_paths(document) if path[0] not in kept]
        if not paths:  # everything that may change is gone already
            return
        path = draw(st.sampled_from(paths))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(odd_values)))
