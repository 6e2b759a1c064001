"""Assembling the operator from its parts and running it until told to stop.

`run_operator` is what `kai run` calls and what the integration tests run in
process: the watch cache, the leader elector, the scheduling loop and the HTTP
endpoints as tasks on one event loop, the engine on a worker thread. Everything
but the elector writes through a `LeaderOnlyKube`, so a replica that does not
hold the Lease writes nothing. On stop it releases the Lease first, so a standby
takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from kai.engine.model import EngineConfig, EvictionConfig, PlacementStrategy
from kai.kube.client import Kube, connect
from kai.kube.lease import LeaderElector
from kai.kube.owners import OwnerReader
from kai.operator.backoff import BindBackoff
from kai.operator.binder import Binder
from kai.operator.cache import ClusterCache
from kai.operator.config import OperatorConfig
from kai.operator.events import EventRecorder
from kai.operator.gpu_sharing import GpuSharing
from kai.operator.isolation import Engine
from kai.operator.leading import LeaderOnlyKube
from kai.operator.loop import SchedulingLoop
from kai.operator.metrics import Metrics
from kai.operator.pod_grouper import PodGrouper
from kai.operator.server import HealthServer
from kai.operator.snapshot import SnapshotBuilder
from kai.operator.stamps import StampWriter
from kai.operator.status import StatusWriter
from kai.operator.unserved import UnservedPools

log = structlog.get_logger(__name__)

STUCK_AFTER_PERIODS = 30
"""Liveness fails when no cycle has finished for this many periods (plus the solver budget)."""


@dataclass
class Operator:
    """The running parts, for callers (tests, the CLI) that want to look inside."""

    config: OperatorConfig
    cache: ClusterCache
    loop: SchedulingLoop
    elector: LeaderElector | None
    server: HealthServer | None
    metrics: Metrics
    grouper: PodGrouper
    stuck_after_seconds: float

    def is_leader(self) -> bool:
        return self.elector.is_leader() if self.elector is not None else True

    def live(self) -> bool:
        """Cycles keep finishing and the last ones did not all fail (a standby cycles too)."""
        if not self.cache.synced:
            return True
        return time.monotonic() - self.loop.last_alive < self.stuck_after_seconds and (
            self.loop.healthy
        )

    def ready(self) -> bool:
        """The watch cache has listed everything once."""
        return self.cache.synced


async def run_operator(
    config: OperatorConfig,
    started: asyncio.Future[Operator] | None = None,
    run_engine: Engine | None = None,
) -> None:
    """Run until cancelled (or SIGTERM in `kai run`), then clean up.

    `run_engine` is what each cycle solves with: by default `run_cycle` with a memo kept
    for the scheduler's lifetime, or a test's faulty engine.
    """
    client = await connect(config.kubeconfig)
    async with client:
        metrics = Metrics()
        elector = (
            LeaderElector(
                Kube(client),
                config.namespace,
                config.shard.lease_name(config.lease_name),
                config.identity,
                config.lease_seconds,
                config.renew_deadline_seconds,
                config.retry_seconds,
                on_change=metrics.leading,
            )
            if config.leader_election
            else None
        )
        if elector is None:  # the only replica: it leads, and kai_leader says so
            metrics.leading(True)
        is_leader = elector.is_leader if elector is not None else (lambda: True)
        kube = LeaderOnlyKube(client, is_leader)
        events = EventRecorder(
            kube, config.identity, config.events_per_cycle, config.write_concurrency
        )
        cache = ClusterCache(kube, config.watch_seconds, config.shard)
        sharing = GpuSharing(
            kube,
            config.reservation_namespace,
            config.reservation_image,
            config.reservation_runtime_class,
            config.write_concurrency,
        )
        backoff = BindBackoff()
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        grouper = PodGrouper(
            kube,
            OwnerReader(kube),
            events,
            config.reservation_namespace,
            config.write_concurrency,
            config.burst_pods,
            config.node_pool_label,
        )
        loop = SchedulingLoop(
            cache=cache,
            builder=SnapshotBuilder(config.reservation_namespace),
            grouper=grouper,
            binder=Binder(
                kube, sharing, backoff, events, config.bind_concurrency, is_leader, config.shard
            ),
            sharing=sharing,
            status=StatusWriter(kube, events, config.write_concurrency, config.shard.name),
            stamps=StampWriter(kube, config.write_concurrency),
            events=events,
            backoff=backoff,
            metrics=metrics,
            engine=EngineConfig(
                time_limit_seconds=config.time_limit_seconds,
                solver_workers=config.solver_workers,
                placement_strategy=PlacementStrategy(config.placement),
                isolate_solver=True,  # an OR-Tools abort must not take the scheduler down
                evictions=EvictionConfig(
                    stuck_in_releasing_seconds=config.stuck_in_releasing_seconds
                ),
            ),
            executor=executor,
            period_seconds=config.period_seconds,
            debounce_seconds=config.debounce_seconds,
            is_leader=is_leader,
            failed_cycles_unhealthy=config.failed_cycles_unhealthy,
            failed_requests=lambda: kube.failed_requests,
            quiet_recheck_seconds=config.quiet_recheck_seconds,
            run_engine=run_engine,
            shard=config.shard,
            unserved=(
                UnservedPools(kube, events, config.namespace, config.lease_name, config.shard)
                if config.shard.pool is None and config.leader_election
                else None
            ),
        )
        stuck_after = STUCK_AFTER_PERIODS * config.period_seconds + config.time_limit_seconds
        operator = Operator(config, cache, loop, elector, None, metrics, grouper, stuck_after)
        if config.metrics_port >= 0:
            operator.server = HealthServer(
                metrics,
                operator.live if config.serve_healthz else None,
                operator.ready,
                config.metrics_host,
                config.metrics_port,
            )
            await operator.server.start()
        server = operator.server
        log.info(
            "operator starting",
            identity=config.identity,
            shard=config.shard.name,
            metrics_port=server.port if server else None,
        )
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(cache.run(), name="cache")
                if elector is not None:
                    tasks.create_task(elector.run(), name="leader-election")
                tasks.create_task(loop.run(), name="scheduling-loop")
                if started is not None and not started.done():
                    started.set_result(operator)
        finally:
            with contextlib.suppress(Exception):
                if elector is not None:
                    await asyncio.shield(elector.release())
            if server is not None:
                await server.stop()
            executor.shutdown(wait=False, cancel_futures=True)  # a solve in progress is abandoned
            log.info("operator stopped", identity=config.identity)
