"""Running many API writes at once, with a bound, and collecting which of them failed.

Every write the operator makes at the end of a cycle (bindings, status, events,
grouping) goes through here, so the number of requests in flight against the
API server never exceeds one configured limit per batch, and a failed write is
reported, never raised into the cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import structlog

from kai.kube.client import ApiError

log = structlog.get_logger(__name__)

K = TypeVar("K")


async def run_bounded(
    writes: Iterable[tuple[K, Callable[[], Awaitable[object]]]], limit: int
) -> dict[K, ApiError]:
    """Run each write with at most `limit` in flight; the failures, by their key."""
    semaphore = asyncio.Semaphore(limit)
    failures: dict[K, ApiError] = {}

    async def one(key: K, write: Callable[[], Awaitable[object]]) -> None:
        async with semaphore:
            try:
                await write()
            except ApiError as error:
                failures[key] = error

    async with asyncio.TaskGroup() as group:
        for key, write in writes:
            group.create_task(one(key, write))
    return failures
