"""Pods with what the objects they depend on say, worked out again only when those change.

A pod's parse is kept while the pod is the same object (`kai.operator.parse_memo`), but
what its claims, the ConfigMaps it requires and the namespaces its terms select by label
say changes without the pod: a claim gets bound, a ConfigMap is made, a namespace is
labelled (`kai.api.dependencies`). So such a pod is never kept by the
parse memo alone; it is handed out every cycle, and this memo gives back the very pod
of the last cycle while its parse and what it read of the cluster are the same. The
engine's memo then sees the same object, and the pod counts as unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.api.dependencies import ClusterObjects, inputs, with_dependencies
from kai.engine.model import Pod

_Entry = tuple[Pod, tuple[object, ...], Pod]
"""(the pod as parsed, what it read of the cluster, the pod with its dependencies)"""


class DependenciesMemo:
    """Each dependent pod's reading, by pod key, from the last cycle to this one."""

    def __init__(self) -> None:
        self._last: dict[str, _Entry] = {}
        self._next: dict[str, _Entry] = {}

    def applied(
        self, key: str, pod: Pod, manifest: Mapping[str, Any], objects: ClusterObjects
    ) -> Pod:
        """The pod with what it depends on (`kai.api.dependencies.with_dependencies`)."""
        read = inputs(pod, manifest, objects)
        last = self._last.get(key)
        if last is not None and last[0] is pod and _same(last[1], read):
            result = last[2]
        else:
            result = with_dependencies(pod, manifest, objects)
        self._next[key] = (pod, read, result)
        return result

    def end_cycle(self) -> None:
        """Forget the pods this cycle did not ask about (gone, or no longer dependent)."""
        self._last, self._next = self._next, {}


def _same(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    """The same objects (claims are compared by identity), the same ConfigMaps present and
    the same namespaces selected."""
    return len(before) == len(now) and all(
        a is b or (isinstance(a, tuple) and a == b) for a, b in zip(before, now, strict=True)
    )
