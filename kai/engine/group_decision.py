"""What a cycle decided for one PodGroup: scheduled, or pending with a reason code and a message.

Its own module so that the memo of the last snapshot (`kai.engine.memo`) can keep the
decisions of groups that stay scheduled without importing the cycle that makes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupDecision:
    key: str
    queue: str
    scheduled: bool
    reason: str | None
    message: str
