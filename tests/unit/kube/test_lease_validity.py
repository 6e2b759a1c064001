"""A renewal counts from when its attempt started: a slow answer does not stretch leadership.

The others time the Lease from when they saw the write, which is before the
answer reaches the holder; counting from the answer would let the holder lead
past the moment a standby may take over. The clock is the elector's own (it
takes one), advanced by the server as each request "takes" seconds.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from kai.kube.lease import LeaderElector
from tests.unit.kube.fake_api import kube_at, never, serving, status

SECONDS_PER_REQUEST = 4.0
RENEW_DEADLINE = 10.0


async def test_a_slow_acquisition_leads_only_until_the_deadline_counted_from_its_start() -> None:
    now = [0.0]
    changes: list[bool] = []

    async def slow_server(request: web.Request) -> web.StreamResponse:
        if now[0] >= 2 * SECONDS_PER_REQUEST:  # the first GET and create are done
            await never()
        now[0] += SECONDS_PER_REQUEST
        if request.method == "GET":
            return status(404, "NotFound")
        return web.json_response({"kind": "Lease"}, status=201)

    async with serving(slow_server) as url, kube_at(url) as kube:
        elector = LeaderElector(
            kube,
            "ns",
            "lease",
            "me",
            lease_seconds=15.0,
            renew_deadline_seconds=RENEW_DEADLINE,
            retry_seconds=0.05,
            clock=lambda: now[0],
            on_change=changes.append,
        )
        task = asyncio.create_task(elector.run())
        try:
            async with asyncio.timeout(60):
                while not changes:
                    await asyncio.sleep(0.01)
            assert changes == [True]
            assert elector.is_leader()  # 8 s after the attempt started
            now[0] = RENEW_DEADLINE + 1.0  # 3 s after the create's answer came
            assert not elector.is_leader()
        finally:
            task.cancel()
