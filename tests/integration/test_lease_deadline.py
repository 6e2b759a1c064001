"""A holder whose renewals hang stops leading at the renew deadline, and says so, on time.

kai's client talks to the real kube-apiserver through a small TCP proxy in the
test that can stop forwarding (a network partition that leaves connections
open). The client's retry policy is given an hour, so the only thing that can
end a hung renewal within the test's patience is the elector's own bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

from kai_operator_support import unique
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration

from kai.kube.client import Kube
from kai.kube.lease import LeaderElector
from kai.kube.retry import RetryPolicy
from kai.testing.controlplane import ClusterAccess


class StallingProxy:
    """Forwards TCP to `upstream` while `forwarding` is set; holds every byte while it is not."""

    def __init__(self, host: str, port: int) -> None:
        self.forwarding = asyncio.Event()
        self.forwarding.set()
        self._upstream = (host, port)
        self._pipes: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[int]:
        """The local port it listens on; every connection is closed on exit."""
        server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        try:
            yield server.sockets[0].getsockname()[1]
        finally:
            server.close()
            for pipe in list(self._pipes):
                pipe.cancel()
            await asyncio.gather(*self._pipes, return_exceptions=True)
            await server.wait_closed()

    async def _connect(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        upstream, to_upstream = await asyncio.open_connection(*self._upstream)
        for source, sink in ((client, to_upstream), (upstream, to_client)):
            pipe = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self.forwarding.wait()
                sink.write(data)
                await sink.drain()
        except ConnectionError:
            pass  # the other side went away; closing below ends the opposite pipe too
        finally:
            sink.close()


async def _until(what: str, condition: Callable[[], bool], task: asyncio.Task[None]) -> None:
    try:
        async with asyncio.timeout(60):
            while not condition():
                assert not task.done(), f"the elector ended: {task}"
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_a_hung_renewal_ends_leadership_at_the_renew_deadline(
    control_plane: ClusterAccess, namespace: str
) -> None:
    server = urlsplit(control_plane.server)
    proxy = StallingProxy(server.hostname or "127.0.0.1", server.port or 443)
    configuration = Configuration()
    await config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=configuration
    )
    changes: list[bool] = []
    async with proxy.listening() as port:
        configuration.host = f"https://127.0.0.1:{port}"
        async with ApiClient(configuration) as api:
            elector = LeaderElector(
                Kube(api, RetryPolicy(deadline_seconds=3600.0)),
                namespace,
                unique("lease"),
                "holder",
                lease_seconds=6.0,
                renew_deadline_seconds=3.0,
                retry_seconds=0.5,
                on_change=changes.append,
            )
            task = asyncio.create_task(elector.run())
            try:
                await _until("leadership", elector.is_leader, task)
                proxy.forwarding.clear()
                await _until("leadership lost", lambda: changes[-1] is False, task)
                assert not elector.is_leader()
                proxy.forwarding.set()
                await _until("leadership back", lambda: changes[-1] is True, task)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
