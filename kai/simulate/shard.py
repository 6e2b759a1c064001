"""`kai simulate --node-pool`: keep the input documents one shard would see.

The cut is `kai.api.shards`, the one `kai run --node-pool` applies to its watch
cache, so a shard simulated from a multi-pool cluster's manifests sees the nodes,
queues, PodGroups and pods the live shard would. Workload objects (Jobs, JobSets,
...) are kept by their own node-pool label, which their groups take (a pod
template's label counts only for an unlabelled owner; such a workload is kept by
its own, missing, label: label the workload, not only its template).
`kind: List` documents are opened, so their items are cut one by one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai.api.shards import Shard, shard_objects

__all__ = ["Shard", "shard_documents"]

_CUT = ("Node", "Queue", "PodGroup", "Pod")
_ALWAYS = ("PriorityClass",)


def shard_documents(
    documents: Sequence[tuple[str, object]], shard: Shard
) -> list[tuple[str, object]]:
    """The documents of `shard`, in input order; anything not an object passes for the parser."""
    items = [(source, doc) for source, top in documents for doc in _opened(top)]
    by_kind: dict[str, dict[str, Mapping[str, Any]]] = {kind: {} for kind in _CUT}
    for index, (_, doc) in enumerate(items):
        if isinstance(doc, Mapping) and doc.get("kind") in _CUT:
            by_kind[str(doc["kind"])][_key(index, doc)] = doc
    cut = shard_objects(
        shard, by_kind["Node"], by_kind["Queue"], by_kind["PodGroup"], by_kind["Pod"]
    )
    kept = {**cut.nodes, **cut.queues, **cut.pod_groups, **cut.pods}
    result: list[tuple[str, object]] = []
    for index, (source, doc) in enumerate(items):
        if not isinstance(doc, Mapping) or doc.get("kind") in _ALWAYS:
            result.append((source, doc))
        elif doc.get("kind") in _CUT:
            if _key(index, doc) in kept:
                result.append((source, doc))
        elif shard.owns(doc):
            result.append((source, doc))
    return result


def _opened(doc: object) -> list[object]:
    if (
        isinstance(doc, Mapping)
        and doc.get("kind") == "List"
        and isinstance(doc.get("items"), list)
    ):
        return list(doc["items"])
    return [doc]


def _key(index: int, doc: Mapping[str, Any]) -> str:
    """PodGroups by "namespace/name", as pods name them; the others by position (unique)."""
    if doc.get("kind") == "PodGroup":
        metadata = doc.get("metadata") or {}
        return f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
    return f"#{index}"
