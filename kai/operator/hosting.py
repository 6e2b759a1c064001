"""`kai run` as a kopf operator: kopf runs the process, the scheduler runs inside it.

kopf owns what it does well: logging in (through kubernetes-asyncio, `kai.kube.kopf_process`),
the process lifecycle (signals, startup, cleanup), and the liveness endpoint, whose
probe handler reports the scheduler's cycles. It runs standalone: kopf's peering
pauses every replica at equal priority and has no fencing, so which replica
schedules is decided by the scheduler's own Lease (`kai.kube.lease`), and the
cluster is read by the scheduler's own informers (`kai.kube.informer`), which
replace their view on a relist where kopf's watcher keeps objects deleted while it
was disconnected. No resource handler is registered, so kopf watches nothing and
writes nothing to any object.

The scheduler (`run_operator`) starts in the startup handler and stops in the
cleanup handler, which releases the Lease so a standby takes over at once. If the
scheduler stops by itself (it failed), kopf is told to stop and `kai run` exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import kopf
import structlog

from kai.kube.kopf_process import register_login, run_kopf
from kai.operator.app import Operator, run_operator
from kai.operator.config import OperatorConfig

log = structlog.get_logger(__name__)

STOP_SECONDS = 30.0
"""How long cleanup waits for the scheduler to release its Lease and close its client."""


@dataclass
class _Hosted:
    """The scheduler task between the startup and the cleanup handlers."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    operator: Operator | None = None
    failure: BaseException | None = None


async def run_hosted(config: OperatorConfig, liveness_endpoint: str | None) -> int:
    """Run the scheduler under kopf until SIGINT or SIGTERM (0) or until it fails (1)."""
    hosted = _Hosted()
    registry = _registry(config, hosted)
    settings = kopf.OperatorSettings()
    settings.scanning.disabled = True  # no resource handlers: nothing to discover or watch
    settings.posting.enabled = False  # kai posts its own Events (`kai.operator.events`)
    if not await run_kopf(registry, settings, liveness_endpoint, hosted.stop):
        return 1
    if hosted.failure is not None:
        log.error("scheduler stopped", error=repr(hosted.failure))
        return 1
    return 0


def _registry(config: OperatorConfig, hosted: _Hosted) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    register_login(registry, config.kubeconfig)

    @kopf.on.startup(id="start-scheduler", registry=registry, errors=kopf.ErrorsMode.PERMANENT)
    async def start_scheduler(**_: Any) -> None:
        started: asyncio.Future[Operator] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(run_operator(config, started), name="kai-scheduler")
        hosted.task = task
        task.add_done_callback(lambda done: _stopped_by_itself(hosted, done))
        waiting: list[asyncio.Future[Any]] = [started, task]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():
            raise kopf.PermanentError(f"the scheduler did not start: {hosted.failure!r}")
        hosted.operator = started.result()

    @kopf.on.cleanup(id="stop-scheduler", registry=registry)
    async def stop_scheduler(**_: Any) -> None:
        task = hosted.task
        if task is None or task.done():
            return
        task.cancel()  # run_operator releases the Lease on its way out
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, STOP_SECONDS)

    @kopf.on.probe(id="scheduler", registry=registry, errors=kopf.ErrorsMode.PERMANENT)
    def scheduler_probe(**_: Any) -> dict[str, Any]:
        operator = hosted.operator
        if operator is None:
            raise kopf.PermanentError("the scheduler is not running")
        if not operator.live():
            raise kopf.PermanentError(
                f"no good cycle for {operator.stuck_after_seconds:g}s or "
                f"{operator.loop.failed_in_a_row} failed cycles in a row"
            )
        return {
            "cycles": operator.loop.cycles,
            "leader": operator.is_leader(),
            "synced": operator.ready(),
        }

    return registry


def _stopped_by_itself(hosted: _Hosted, task: asyncio.Task[None]) -> None:
    """The scheduler ended without being asked to (an error): stop kopf so the process exits."""
    if task.cancelled():
        return
    hosted.failure = task.exception() or RuntimeError("the scheduler returned")
    hosted.stop.set()
