"""The queue hierarchy as KAI's proportion plugin walks it: roots, children, ancestry.

Fair share is divided top-down over this tree and usage is summed bottom-up along
it, so both need the same view of which queues take part. KAI drops a queue whose
parent is missing together with its whole subtree (kai-semantics §3.1); we do the
same by keeping only queues reachable from a parentless root, which also drops any
cycle that slipped past validation instead of looping on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from kai.engine.model import Queue


@dataclass(frozen=True)
class QueueTree:
    """The queues that take part in a cycle, by name, with their children in name order."""

    queues: dict[str, Queue]
    children: dict[str | None, tuple[Queue, ...]]
    """Children of each queue name; the key None holds the top-level queues."""

    def children_of(self, name: str | None) -> tuple[Queue, ...]:
        return self.children.get(name, ())

    def ancestry(self, name: str) -> Iterator[Queue]:
        """The queue itself, then its parent, and so on up to its top-level queue."""
        current: str | None = name
        while current is not None:
            queue = self.queues[current]
            yield queue
            current = queue.parent

    def __iter__(self) -> Iterator[Queue]:
        return iter(self.queues.values())

    def __contains__(self, name: object) -> bool:
        return name in self.queues


def build_queue_tree(queues: Sequence[Queue]) -> QueueTree:
    """The tree of `queues`, without orphans and their subtrees. Duplicate names are an error."""
    by_name: dict[str, Queue] = {}
    for queue in queues:
        if queue.name in by_name:
            raise ValueError(f"Queue {queue.name}: metadata.name is defined more than once")
        by_name[queue.name] = queue
    all_children: dict[str | None, list[Queue]] = {}
    for queue in sorted(queues, key=lambda q: q.name):
        all_children.setdefault(queue.parent, []).append(queue)

    reachable: dict[str, Queue] = {}
    children: dict[str | None, tuple[Queue, ...]] = {}
    frontier: list[str | None] = [None]
    while frontier:
        parent = frontier.pop()
        kids = tuple(all_children.get(parent, ()))
        if kids:
            children[parent] = kids
        for kid in kids:
            reachable[kid.name] = kid
            frontier.append(kid.name)
    return QueueTree(queues=reachable, children=children)


def creation_order(queue: Queue) -> tuple[bool, datetime, str]:
    """Sort key: older queues first, then by name (KAI's queue UID is its object name, §3.1).

    A queue without a creation timestamp sorts first, as Go's zero time does in KAI.
    """
    return (queue.created is not None, queue.created or datetime.min, queue.name)
