"""Running many API writes at once, with a bound, and collecting which of them failed.

Every write the operator makes at the end of a cycle (bindings, status, events,
grouping) goes through here, so the number of requests in flight against the
API server never exceeds one configured limit per batch, and a failed write is
reported, never raised into the cycle: an unexpected error (a bug) in one write
is logged with its trace and reported like a refusal, and the batch's other
writes go on.
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
) -> dict[K, Exception]:
    """Run each write with at most `limit` in flight; the failures, by their key."""
    semaphore = asyncio.Semaphore(limit)
    failures: dict[K, Exception] = {}

    async def one(key: K, write: Callable[[], Awaitable[object]]) -> None:
        async with semaphore:
            try:
                await write()
            except ApiError as error:
                failures[key] = error
            except Exception as error:  # a bug in one write must not cancel the batch
                log.exception("write failed unexpectedly", write=str(key))
                failures[key] = error

    async with asyncio.TaskGroup() as group:
        for key, write in writes:
            group.create_task(one(key, write))
    return failures
