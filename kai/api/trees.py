"""Finding cycles in a forest given as child -> parent links (queues, PodGroup subgroups).

Both trees are written by users one object or one list entry at a time, so a parent
link can loop back; the loop must be reported, member by member, not followed forever.
"""

from __future__ import annotations

from collections.abc import Mapping


def cycles(parents: Mapping[str, str | None]) -> list[tuple[str, ...]]:
    """Every cycle among the links, each listed from its alphabetically first member, child first.

    A parent that is not itself a key ends the walk: a missing parent is a different
    problem, reported by the caller.
    """
    found: list[tuple[str, ...]] = []
    on_path: set[str] = set()
    finished: set[str] = set()
    for start in sorted(parents):
        path: list[str] = []
        node: str | None = start
        while node is not None and node in parents and node not in finished:
            if node in on_path:
                loop = path[path.index(node) :]
                first = loop.index(min(loop))
                found.append(tuple(loop[first:] + loop[:first]))
                break
            on_path.add(node)
            path.append(node)
            node = parents[node]
        on_path.difference_update(path)
        finished.update(path)
    return found


def describe(cycle: tuple[str, ...]) -> str:
    """`a -> b -> a`: the cycle as a reader follows it, back to where it starts."""
    return " -> ".join((*cycle, cycle[0]))
