"""Pods with what their volume claims say, worked out again only when a claim changes.

A pod's parse is kept while the pod is the same object (`kai.operator.parse_memo`), but
what its claims say changes without the pod: a claim gets bound, a volume is made. So a
pod that names claims is never kept by the parse memo alone; it is handed out every
cycle, and this memo gives back the very pod of the last cycle while its parse and the
claims, volumes and StorageClasses it read are the very objects they were. The engine's
memo then sees the same object, and the pod counts as unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai.api.errors import ManifestError
from kai.api.volumes import VolumeObjects, claim_inputs, claim_keys, pod_claims, with_claims
from kai.engine.model import Pod

_Entry = tuple[Pod, tuple[object, ...], Pod]
"""(the pod as parsed, the objects its claims were read from, the pod with its claims)"""


class ClaimsMemo:
    """Each claimant pod's reading, by pod key, from the last cycle to this one."""

    def __init__(self) -> None:
        self._last: dict[str, _Entry] = {}
        self._next: dict[str, _Entry] = {}

    def applied(
        self, key: str, pod: Pod, manifest: Mapping[str, Any], objects: VolumeObjects
    ) -> Pod:
        """The pod with where its claims let it run (`kai.api.volumes.with_claims`)."""
        try:
            inputs = claim_inputs(claim_keys(manifest), objects)
        except ManifestError:  # no claims to read: the reading says why
            inputs = ()
        last = self._last.get(key)
        if last is not None and last[0] is pod and _same(last[1], inputs):
            result = last[2]
        else:
            result = with_claims(pod, pod_claims(manifest, objects))
        self._next[key] = (pod, inputs, result)
        return result

    def end_cycle(self) -> None:
        """Forget the pods this cycle did not ask about (gone, or no longer claimants)."""
        self._last, self._next = self._next, {}


def _same(before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))
