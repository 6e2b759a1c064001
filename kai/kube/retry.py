"""When a failed API request is tried again, and after how long: one policy for every request.

The API server sheds load with 429 (and sometimes 503) and a Retry-After; it
answers 5xx while etcd or a webhook struggles; connections drop. A request that
can safely be repeated (a read, or a write whose second application changes
nothing more) is retried with capped, jittered exponential backoff, honouring a
capped Retry-After, until a total deadline. A write that is not safe to repeat
(a POST: a create, or a pod's binding) is retried only when it certainly did not
happen: the server throttled it (429) or it was never sent. Anything else
reaches the caller, with `ApiError.outcome_unknown` saying whether it may have
been carried out.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the client imports this module
    from kai.kube.client import ApiError

_THROTTLED = 429


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures are retried and how long to wait before the next attempt."""

    deadline_seconds: float = 10.0
    """Total time from the first attempt after which no further attempt starts.

    No longer than the default renew deadline: a write retried inside the client
    does not see the caller's leadership checks, so it must not outlive them long.
    """
    first_backoff_seconds: float = 0.2
    max_backoff_seconds: float = 5.0
    max_retry_after_seconds: float = 10.0
    """A Retry-After beyond this is shortened to it, so one answer cannot park a request."""
    jitter: Callable[[], float] = field(default=random.random, compare=False)
    """A number in [0, 1); spreads retries of many clients that failed at the same moment."""

    def should_retry(self, error: ApiError, idempotent: bool) -> bool:
        """Whether `error` is worth another attempt of a request that is (or is not) safe to repeat."""
        if not error.is_transient:
            return False
        if idempotent:
            return True
        return error.status == _THROTTLED or not error.sent

    def delay(self, attempt: int, error: ApiError) -> float:
        """Seconds to wait before retry number `attempt` (0 for the first retry)."""
        if error.retry_after is not None and error.status in (429, 503):
            return min(error.retry_after, self.max_retry_after_seconds)
        backoff = min(
            self.max_backoff_seconds, self.first_backoff_seconds * 2.0 ** min(attempt, 32)
        )
        return backoff * (0.5 + 0.5 * self.jitter())
