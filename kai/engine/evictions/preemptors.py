"""A pending gang as the eviction actions see it: the pods it needs placed now, and what they ask for."""

from __future__ import annotations

from dataclasses import dataclass

from kai.engine.gangs import GangRequest, pod_resources
from kai.engine.model import Pod
from kai.engine.resources import Resources


@dataclass(frozen=True)
class Preemptor:
    """A pending gang looking for room, and the pods it needs placed now."""

    gang: GangRequest
    pods: tuple[Pod, ...]
    request: Resources  # the pods' resources as the gang's queue accounts them

    @property
    def key(self) -> str:
        return self.gang.key

    @property
    def queue(self) -> str:
        return self.gang.group.queue

    @classmethod
    def of(cls, gang: GangRequest, memory_mib: int) -> Preemptor:
        """The gang core, or (for a gang already at its minimum) its next elastic pod."""
        if gang.core:  # the gang keeps its core's sum: a cycle asks for it many times
            return cls(gang, gang.core, gang.core_request(memory_mib))
        pods = gang.elastic[:1]
        return cls(gang, pods, sum((pod_resources(p, memory_mib) for p in pods), Resources()))
