"""Backing off pods whose bind keeps failing, so they cannot starve everyone else (KAI#2074).

A pod whose bind is refused (a webhook, a quota, a server error) would otherwise
win the same placement every cycle and fail again, while the capacity it is
given is withheld from others. After a failure its group sits out for a while,
doubling with each further failure up to a cap; the group's status says why.
A success, or the pod going away, clears the record.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kai.engine.model import SetAside

BIND_BACKOFF = "BindBackoff"


@dataclass(frozen=True)
class _Failure:
    group: str
    queue: str
    count: int
    until: float
    message: str


class BindBackoff:
    def __init__(self, base_seconds: float = 1.0, cap_seconds: float = 60.0) -> None:
        self._base = base_seconds
        self._cap = cap_seconds
        self._failures: dict[str, _Failure] = {}

    def failed(self, pod: str, group: str, queue: str, node: str, error: str, now: float) -> None:
        count = self._failures[pod].count + 1 if pod in self._failures else 1
        delay = min(self._cap, self._base * 2 ** (count - 1))
        message = (
            f"binding pod {pod} to node {node} failed {count} time(s), last: {error}; "
            f"the group waits {delay:g}s before it is scheduled again"
        )
        self._failures[pod] = _Failure(group, queue, count, now + delay, message)

    def succeeded(self, pod: str) -> None:
        self._failures.pop(pod, None)

    def forget_missing(self, present: Collection[str]) -> None:
        for pod in [p for p in self._failures if p not in present]:
            del self._failures[pod]

    def held(self, now: float) -> dict[str, SetAside]:
        """Groups still waiting out a failure, with the reason their status shows."""
        result: dict[str, SetAside] = {}
        for failure in self._failures.values():
            if failure.until > now:
                result[failure.group] = SetAside(
                    failure.group, failure.queue, BIND_BACKOFF, failure.message
                )
        return result
