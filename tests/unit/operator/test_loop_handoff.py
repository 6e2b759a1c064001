"""A burst's cycle that hands its binds over: the next cycle plans once the first is settled.

The next cycle's engine runs on its own thread but under the same interpreter lock as
the event loop that opens the first binds' connections; planning right away held those
binds up by about 0.3 s (see `_Handoff.answered`). These tests step the event loop, not
a clock: `_first_answer` has nothing else to wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from kai.operator.loop import _first_answer, _Handoff

_STEPS = 20  # more event-loop steps than waiting could take

_Waiting = tuple[_Handoff, asyncio.Future[None], asyncio.Future[None]]


@contextlib.asynccontextmanager
async def _next_cycle_waiting() -> AsyncIterator[_Waiting]:
    """A handoff, the rest of its cycle, and the next cycle waiting on them, still waiting
    after every step it could take."""
    handoff = _Handoff({}, {}, None)
    rest: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(_first_answer(handoff, rest))
    try:
        for _ in range(_STEPS):
            await asyncio.sleep(0)
        assert not waiting.done()
        yield handoff, rest, waiting
    finally:
        waiting.cancel()
        if not rest.done():
            rest.cancel()


async def test_the_next_cycle_waits_for_the_first_answer_not_for_the_binds_to_go_out() -> None:
    async with _next_cycle_waiting() as (handoff, _rest, waiting):
        handoff.answered.set()
        await asyncio.wait_for(waiting, 60)


async def test_a_rest_that_ended_without_an_answer_does_not_hold_the_next_cycle() -> None:
    async with _next_cycle_waiting() as (handoff, rest, waiting):
        rest.set_exception(RuntimeError("the binds failed before any answer"))
        await asyncio.wait_for(waiting, 60)
    assert isinstance(rest.exception(), RuntimeError)
    assert not handoff.answered.is_set()
