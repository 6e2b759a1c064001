"""A batch of writes reports each failure, whatever it is, and never cancels the others."""

from __future__ import annotations

import asyncio

from kai.kube.client import ApiError
from kai.kube.writes import run_bounded


async def test_an_unexpected_error_in_one_write_neither_stops_the_others_nor_escapes() -> None:
    done: list[str] = []
    release = asyncio.Event()

    async def fine(name: str) -> None:
        await release.wait()  # still running when the broken write fails
        done.append(name)

    async def broken() -> None:
        release.set()
        raise RuntimeError("a bug while building the write")

    async def refused() -> None:
        raise ApiError("PATCH", "/x", 422, "Invalid", "no")

    writes = [
        ("a", lambda: fine("a")),
        ("bug", broken),
        ("b", lambda: fine("b")),
        ("refused", refused),
    ]
    failures = await run_bounded(writes, limit=4)
    assert sorted(done) == ["a", "b"]
    assert set(failures) == {"bug", "refused"}
    assert isinstance(failures["bug"], RuntimeError)
    assert isinstance(failures["refused"], ApiError)
