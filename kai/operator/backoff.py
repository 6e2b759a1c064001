"""Backing off pods whose bind keeps failing, so they cannot starve everyone else (KAI#2074).

A pod whose bind is refused (a webhook, a quota, a server error) would otherwise
win the same placement every cycle and fail again, while the capacity it is
given is withheld from others. After a failure its group sits out for a while,
doubling with each further failure up to a cap; the group's status says why.
A success, or the pod going away, clears the record. Records are kept by pod uid:
a pod recreated under the same name (a StatefulSet's) starts with a clean slate.
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
        self._failures: dict[str, _Failure] = {}  # pod uid -> its last failure

    def failed(
        self, pod: str, uid: str, group: str, queue: str, node: str, error: str, now: float
    ) -> None:
        """Pod `pod` (key) with this uid failed to bind to `node`."""
        count = self._failures[uid].count + 1 if uid in self._failures else 1
        delay = min(self._cap, self._base * 2 ** (count - 1))
        message = (
            f"binding pod {pod} to node {node} failed {count} time(s), last: {error}; "
            f"the group waits {delay:g}s before it is scheduled again"
        )
        self._failures[uid] = _Failure(group, queue, count, now + delay, message)

    def succeeded(self, uid: str) -> None:
        self._failures.pop(uid, None)

    def forget_missing(self, present_uids: Collection[str]) -> None:
        for uid in [u for u in self._failures if u not in present_uids]:
            del self._failures[uid]

    def __len__(self) -> int:
        return len(self._failures)

    def held(self, now: float) -> dict[str, SetAside]:
        """Groups still waiting out a failure, with the reason their status shows."""
        result: dict[str, SetAside] = {}
        for failure in self._failures.values():
            if failure.until > now:
                result[failure.group] = SetAside(
                    failure.group, failure.queue, BIND_BACKOFF, failure.message
                )
        return result
