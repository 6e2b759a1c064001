"""The API client every scheduler write goes through: it refuses to write while the replica does not lead.

Only the Lease holder may change the cluster. The loop runs no cycle on a standby and
checks the Lease between a cycle's steps, but a cycle that loses the Lease midway
still has writes in flight (group writes started before the engine ran, a gang's
binds, status, events, reservation garbage collection). Checking at the one place
all of them pass means no writer can forget it, and the client's retries of a write
ask it again (`proceed`). The Lease itself is written through
a plain `Kube`: renewing it is how a replica leads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient

from kai.kube.client import ApiError, Kube

_READS = frozenset({"GET"})
NOT_LEADING = "NotLeading"


class NotLeadingError(ApiError):
    """A write refused before it was sent: this replica does not hold the Lease."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(
            method, path, 0, NOT_LEADING, "this replica does not hold the Lease", sent=False
        )


class LeaderOnlyKube(Kube):
    """A `Kube` whose writes raise `NotLeadingError` unless `is_leader()` holds when they start."""

    def __init__(self, client: ApiClient, is_leader: Callable[[], bool]) -> None:
        super().__init__(client)
        self._is_leader = is_leader

    async def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if method not in _READS:
            self._check(method, path)
        return await super().request(method, path, *args, **kwargs)

    async def write(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        proceed: Callable[[], bool] | None = None,
    ) -> None:
        """Refused unless leading; a retry of it is sent only while still leading, too."""
        self._check(method, path)

        def still_leading() -> bool:
            return self._is_leader() and (proceed is None or proceed())

        await super().write(method, path, body, content_type, timeout, still_leading)

    def _check(self, method: str, path: str) -> None:
        if not self._is_leader():
            raise NotLeadingError(method, path)
