"""The scheduling loop: one cycle every period, and early after relevant changes.

A cycle: take a consistent view of the watch cache; plan the groups of new pods
(reads only); start writing their PodGroups; meanwhile build the engine's
snapshot with the plans and the scheduler's own recent binds laid over it, and
solve it on a worker thread (the engine is CPU-bound and must not stall the
watches, the lease renewals or those writes on the event loop); bind, each pod
as soon as its group is written; collect unused GPU reservations; record
metrics; then start writing status and events, which go out while the next
cycle plans and binds (the next cycle waits for them before starting its own).
A cycle that binds every pod it grouped and decides nothing else (outside a
burst, also no timestamp but the starts its group creates carry, and not the
cycle that ends a burst) hands its binds over and returns once it has decided:
they go out the moment the previous cycle's binds are done, and they and
everything after them go on while the next cycle plans and decides, with that
cycle's plans and binds laid over the cache.
Only the leader runs cycles, and a cycle that finds the Lease lost between its
steps stops there (the API client refuses the writes still in flight); a
cycle's status and events are dropped if the Lease is lost before they go out.
A failing cycle is logged and counted, and the next one starts from the cluster
as it is then; the loop is alive while cycles finish, and unhealthy after
`failed_cycles_unhealthy` failures in a row. A quiet cluster is let be: after
a cycle that decided and grouped nothing, with no bind of this process still
unconfirmed and no group in backoff, the passes that find the cache unchanged,
no API request failed since that cycle began and no time rule of the engine due
(`kai.engine.time_rules`) skip the cycle, which would decide the same; the
first such pass loads the solver, which no cycle may have needed yet
(`preload_solver`). A full cycle still runs every `quiet_recheck_seconds`, a
safety net for an input the cache does not show. While pending pods of a pool
wait on its shard's Lease, which the cache does not watch, the cluster is never
quiet. The engine runs through
`isolation`, so a group whose data makes it raise is set aside and the others
are scheduled. Every view is the shard's (`kai.operator.sharding`); a planned
group that belongs to another pool is written but not scheduled here, and the
default shard tells pending pods of pools without a scheduler (`unserved`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import Executor, Future
from datetime import UTC, datetime
from typing import Any

import structlog

from kai.api.shards import Shard
from kai.engine.cycle import CycleResult, preload_solver
from kai.engine.decision_changes import DecisionChanges
from kai.engine.fairshare import QueueShare
from kai.engine.group_decision import GroupDecision
from kai.engine.memo import SnapshotMemo
from kai.engine.model import EngineConfig, Snapshot
from kai.engine.object_index import ObjectIndex
from kai.engine.time_rules import TimeRuleInstants
from kai.grouping import PodGroupPlan
from kai.operator.after_binds import AfterBinds
from kai.operator.backoff import BindBackoff
from kai.operator.binder import Annotations, Binder, Held, still_held
from kai.operator.burst import statuses_to_write
from kai.operator.cache import ClusterCache, ClusterView
from kai.operator.config import QUIET_RECHECK_SECONDS
from kai.operator.events import EventRecorder
from kai.operator.gpu_sharing import GpuSharing
from kai.operator.group_writes import GroupWrites
from kai.operator.isolation import Engine, remembering_engine, run_isolating
from kai.operator.metrics import Metrics
from kai.operator.pod_grouper import Plans, PodGrouper
from kai.operator.sharding import foreign_plans, without_pods
from kai.operator.sharing_facts import SharingFacts
from kai.operator.snapshot import Assumed, Overlay, SnapshotBuilder
from kai.operator.stamps import StampWriter, start_annotations
from kai.operator.status import StatusWriter
from kai.operator.unserved import UnservedPools

log = structlog.get_logger(__name__)


@dataclasses.dataclass(frozen=True)
class Quiet:
    """What a cycle that decided nothing saw: while all of it still holds, a cycle would
    decide nothing again."""

    revision: int
    """The cache's revision its view had."""
    failed_requests: int
    """API requests given up on when it began: one of its own that fails (an owner chain
    not read, a status write refused) undoes the quiet, and the next pass runs a cycle."""
    time_rule_due: datetime | None
    """When an engine time rule next flips for one of its groups."""
    recheck_at: float
    """Monotonic time of the next full cycle regardless."""

    def holds(self, revision: int, failed_requests: int, now: datetime, clock: float) -> bool:
        return (
            revision == self.revision
            and failed_requests == self.failed_requests
            and (self.time_rule_due is None or now < self.time_rule_due)
            and clock < self.recheck_at
        )


@dataclasses.dataclass(frozen=True)
class CycleSummary:
    """What one cycle did, kept for the last few cycles (for tests and debugging)."""

    cycle: str
    bound: tuple[str, ...]
    seconds: float


TRAILING_STOP_GRACE_SECONDS = 10.0
"""How long a stop waits for the last cycle's status and events."""


class LeadershipLostError(Exception):
    """The Lease was lost between two steps of a cycle: the rest of its decisions are dropped."""


class SchedulingLoop:
    def __init__(
        self,
        *,
        cache: ClusterCache,
        builder: SnapshotBuilder,
        grouper: PodGrouper,
        binder: Binder,
        sharing: GpuSharing,
        status: StatusWriter,
        stamps: StampWriter,
        events: EventRecorder,
        backoff: BindBackoff,
        metrics: Metrics,
        engine: EngineConfig,
        executor: Executor,
        period_seconds: float,
        debounce_seconds: float,
        is_leader: Callable[[], bool],
        failed_cycles_unhealthy: int,
        run_engine: Engine | None = None,
        stop_grace_seconds: float = TRAILING_STOP_GRACE_SECONDS,
        shard: Shard | None = None,
        unserved: UnservedPools | None = None,
        failed_requests: Callable[[], int] = lambda: 0,
        quiet_recheck_seconds: float = QUIET_RECHECK_SECONDS,
    ) -> None:
        self._failed_requests = failed_requests
        self._quiet_recheck = quiet_recheck_seconds
        self._quiet: Quiet | None = None
        """Set by a cycle that decided nothing; the passes it holds for skip their cycle."""
        self._shard = shard
        self._unserved = unserved
        self._cache = cache
        self._builder = builder
        self._grouper = grouper
        self._binder = binder
        self._sharing = sharing
        self._sharing_facts: SharingFacts | None = None  # made when first needed
        # The snapshots after each cycle's binds, for the queues' shares in status and
        # metrics: summing every pod again was 7% of a busy cluster's one-pod cycle.
        self._after_binds_memo = SnapshotMemo()
        self._after_snapshots = AfterBinds()
        # Each cycle's snapshot by key and group, for the gangs it binds and the groups they
        # start: walking the 8,000 pods and PodGroups for them was 7% of a steady cycle.
        self._objects = ObjectIndex()
        self._time_rules = TimeRuleInstants()  # when a quiet cluster must be looked at again
        self._status = status
        self._stamps = stamps
        self._events = events
        self._backoff = backoff
        self._metrics = metrics
        self._engine = engine
        self._executor = executor
        self._period = period_seconds
        self._debounce = debounce_seconds
        self._is_leader = is_leader
        self._failed_cycles_unhealthy = failed_cycles_unhealthy
        self._run_engine = run_engine or remembering_engine()
        self._stop_grace = stop_grace_seconds
        self._culprits: tuple[str, ...] = ()
        """Groups the engine failed with last cycle: tried without first if it fails again."""
        self._assumed: dict[str, Held] = {}
        """Pod uid -> a bind of this process the watch does not show yet (or of unknown outcome)."""
        self._trailing: asyncio.Future[None] | None = None  # the last cycle's status and events
        self._handoffs: list[_Handoff] = []
        """The cycles that returned once they had decided (a burst's) whose binds and
        grouping writes are not done, oldest first; their later steps go on in `_tails`."""
        self._tails: set[asyncio.Future[None]] = set()
        """The rest of each cycle that returned once it had decided, until it is done."""
        self._burst_continues = False
        self.cycles = 0
        self.recent: deque[CycleSummary] = deque(maxlen=64)
        self.last_alive = time.monotonic()
        """When a pass of the loop last finished: a cycle, failed or not, or a standby's tick."""
        self.failed_in_a_row = 0
        self.abandoned = 0
        """Cycles that lost the Lease midway."""
        self.passes = 0
        """Passes of the loop, a standby's included."""
        self.skipped = 0
        """Passes that skipped their cycle: nothing had changed since a cycle that decided nothing."""
        self.solver_preload: Future[None] | None = None

    @property
    def status_writer(self) -> StatusWriter:
        return self._status

    @property
    def healthy(self) -> bool:
        """False after `failed_cycles_unhealthy` failed cycles in a row, until one succeeds."""
        return self.failed_in_a_row < self._failed_cycles_unhealthy

    async def run(self) -> None:
        try:
            await self._cycles()
        finally:
            await self._stop_tail()
            await self._finish_trailing()

    async def _stop_tail(self) -> None:
        """On a stop, binds still going out are cancelled, as those of a running cycle are."""
        tails = list(self._tails)
        for tail in tails:  # all first: a cancelled one must not let the next one's binds go
            tail.cancel()
        for tail in tails:
            with contextlib.suppress(asyncio.CancelledError):
                await tail
        self._handoffs.clear()  # those of tails cancelled before they began

    async def _finish_trailing(self) -> None:
        """On a stop, the last cycle's status and events get `stop_grace_seconds` to go out.

        They describe binds already made, and the Lease is released only after this: a
        clean stop leaves the cluster showing its last decisions. Past the grace they are
        dropped (never outliving the scheduler); the next leader writes them again.
        """
        trailing, self._trailing = self._trailing, None
        if trailing is None:
            return
        try:
            async with asyncio.timeout(self._stop_grace):
                await asyncio.shield(trailing)
        except TimeoutError:
            log.warning("the last cycle's status and events not written before the stop")
        except Exception:
            log.exception("the last cycle's status and events failed")
        finally:
            trailing.cancel()

    async def _cycles(self) -> None:
        await self._cache.wait_synced()
        started = 0.0
        while True:
            await self._wait(started)
            started = time.monotonic()
            # Binds this process made stay held while it does not lead: they are facts about
            # the cluster until the watch shows them, and a leader whose Lease only lapsed for
            # a moment would otherwise bind into capacity its own binds already took.
            if not self._is_leader():
                self._quiet = None  # a replica that leads again starts from a full cycle
            elif self._still_quiet():
                self.skipped += 1
                self._metrics.cycles_skipped.inc()
            else:
                await self._guarded_cycle()
            if self._quiet is not None or not self._is_leader():
                self._preload_solver()
            self.last_alive = time.monotonic()
            self.passes += 1

    def _preload_solver(self) -> None:
        """Load the solver on the engine's thread the first time the loop has nothing to do
        (a quiet cluster, or a replica that does not lead), so that the first cycle that
        needs it does not wait for the import; a burst's first binds never do."""
        if self.solver_preload is None:
            self.solver_preload = self._executor.submit(preload_solver)

    def _still_quiet(self) -> bool:
        quiet = self._quiet
        return quiet is not None and quiet.holds(
            self._cache.revision, self._failed_requests(), datetime.now(UTC), time.monotonic()
        )

    async def _guarded_cycle(self) -> None:
        self._quiet = None
        await self._guarded(self.cycle())

    async def _guarded(self, work: Awaitable[None]) -> None:
        """Run a cycle, or the rest of one, counting and logging its failure."""
        try:
            await work
        except Exception as error:  # one bad cycle must not stop the scheduler
            if _lease_lost(error):
                self.abandoned += 1
                self._metrics.cycles_abandoned.inc()
                self._events.discard()
                log.warning("lease lost; the cycle's remaining steps are dropped", at=str(error))
                return
            self.failed_in_a_row += 1
            self._metrics.cycle_failures.inc()
            self._metrics.failed_cycles_in_a_row.set(self.failed_in_a_row)
            log.exception("cycle failed", failed_in_a_row=self.failed_in_a_row)
        else:
            self.failed_in_a_row = 0
            self._metrics.failed_cycles_in_a_row.set(0)

    def _still_leading(self, step: str) -> None:
        if not self._is_leader():
            raise LeadershipLostError(f"before {step}")

    async def _wait(self, last_start: float) -> None:
        """Until the period is up or the cache changes, then until the change settles:
        the debounce, so that events that come together (a cycle's binds and writes
        coming back) make one cycle. A new pod waiting for this scheduler ends the wait at
        once, before or during the debounce: one pod beside 8,000 bound waited 50 ms of
        the 100 ms it took to bind (`bench/e2e.py --steady-pods`). Pods that come while a
        cycle runs start the next one as soon as it ends (a burst's: `kai.operator.burst`)."""
        if self._burst_continues:  # the rest of a burst: the next cycle starts at once
            self._burst_continues = False  # said again by that cycle if it still continues
            self._cache_seen()
            return
        remaining = last_start + self._period - time.monotonic()
        if remaining > 0:
            # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation that arrives as
            # the change does, and the loop then outlives its operator (it went on binding
            # after its test had stopped it).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._cache.changed.wait()
                async with asyncio.timeout(self._debounce):
                    await self._cache.pod_arrived.wait()
        self._cache_seen()

    def _cache_seen(self) -> None:
        """The changes so far are the next cycle's to see."""
        self._cache.changed.clear()
        self._cache.pod_arrived.clear()

    async def cycle(self) -> None:
        """One cycle; when it only binds pods it grouped (see `_binds_only`), it returns
        once it has decided and its binds go on while the next cycle plans."""
        cycle_id = uuid.uuid4().hex[:8]
        timings: dict[str, float] = {}
        began = time.monotonic()
        failed_before = self._failed_requests()  # one of this cycle's failing undoes its quiet
        with structlog.contextvars.bound_contextvars(cycle=cycle_id):
            now = datetime.now(UTC)
            with _timed(timings, "view"):
                view = self._cache.view()
                self._prune_assumed(view)
            with _timed(timings, "group"):
                classes = self._builder.priority_classes(view)
                plans = await self._grouper.plan(view, classes, self._in_flight())
            schedulable = plans.schedulable()
            foreign = foreign_plans(schedulable, self._shard) if self._shard else set()
            assumed = {entry.key: entry.placement for entry in self._assumed.values()}
            overlay = Overlay(
                plans={key: plan for key, plan in schedulable.items() if key not in foreign},
                assumed={**self._binding(), **assumed},
                held=self._backoff.held(time.monotonic()),
            )
            # The new groups are written once the engine has decided; each pod's bind waits for its own.
            async with contextlib.AsyncExitStack() as writes:
                grouping = await writes.enter_async_context(self._grouper.writes(view, plans))
                loop = asyncio.get_running_loop()
                with _timed(timings, "snapshot"):
                    # On the engine's thread too: parsing is CPU-bound, and while a burst's
                    # previous binds are going out the event loop must keep sending them.
                    snapshot = await loop.run_in_executor(
                        self._executor,
                        contextvars.copy_context().run,
                        self._builder.build,
                        without_pods(view, foreign),
                        overlay,
                        now,
                    )
                with _timed(timings, "allocate"):
                    isolated = await loop.run_in_executor(
                        self._executor,
                        run_isolating,
                        self._run_engine,
                        snapshot,
                        self._engine,
                        self._culprits,
                    )
                self._culprits = isolated.culprits
                result = isolated.result
                self._burst_continues = plans.burst_continues
                overlapped = _hands_over(result, plans)
                previous = self._handoffs[-1] if self._handoffs else None
                if not overlapped:
                    with _timed(timings, "previous-binds"):
                        await _done(previous)
                self._still_leading("bind")
                grouping.decided(
                    [binding.pod for binding in result.bindings], start_annotations(result.stamps)
                )
                rest = _Decided(
                    cycle_id, began, timings, failed_before, now, view, plans, overlay, snapshot,
                    result, grouping, writes.pop_all(),
                )  # fmt: skip
            if not overlapped:
                await self._carry_out(rest, tuple(self._tails))
                return
            handoff = _Handoff(
                grouping.planned_with_starts(),
                {b.pod: Assumed(b.node, b.gpu_groups) for b in result.bindings},
                previous.binds_done if previous else None,
            )
            self._handoffs.append(handoff)
            tail = asyncio.ensure_future(
                self._guarded(self._carry_out(rest, tuple(self._tails), handoff))
            )
            self._tails.add(tail)
            tail.add_done_callback(self._tails.discard)
            # Its binds are ready to go the moment the previous cycle's are done; the next
            # cycle plans once the first of them is answered.
            with _timed(timings, "previous-binds"):
                await _done(previous)
            await _first_answer(handoff, tail)

    def _in_flight(self) -> dict[str, PodGroupPlan]:
        """Pod key -> the plan of each pod a handed-over cycle grouped: written, owed or
        refused once its binds are done; the next cycle lays them over the cache meanwhile."""
        return {key: plan for handoff in self._handoffs for key, plan in handoff.plans.items()}

    def _binding(self) -> dict[str, Assumed]:
        """Pod key -> where a handed-over cycle binds it, laid over the cache as made."""
        return {key: at for handoff in self._handoffs for key, at in handoff.binding.items()}

    async def _carry_out(
        self,
        cycle: _Decided,
        earlier: tuple[asyncio.Future[None], ...],
        handoff: _Handoff | None = None,
    ) -> None:
        """The rest of a cycle once its engine has decided: binds (a handed-over cycle's
        once the previous one's are done) and the grouping writes they wait for; and once
        the `earlier` cycles' rests are done, the steps after them. Its summary is
        recorded whatever fails."""
        bound: dict[str, Assumed] = {}
        started: set[str] = set()
        try:
            try:
                async with cycle.writes:
                    with _timed(cycle.timings, "bind"):
                        bound, started = await self._bind(
                            cycle.result,
                            cycle.snapshot,
                            cycle.view,
                            cycle.grouping.annotations,
                            handoff.after if handoff else None,
                            handoff.answered if handoff else None,
                        )
                    with _timed(cycle.timings, "group-write"):
                        await cycle.grouping.finish(bound.keys())
            finally:  # bound or not, the cache and the grouper's memory tell the next cycle now
                if handoff is not None:
                    self._handoffs.remove(handoff)
                    # A stop cancels the next cycle's binds too: they must not go out meanwhile.
                    if not _cancelling():
                        handoff.binds_done.set()
            if handoff is not None:
                # The next cycle's binds, waiting on this event, go out before the rest.
                await asyncio.sleep(0)
            for rest in earlier:  # their stamps and status come first, in order
                await rest
            await self._after_binds(cycle, bound, started)
        finally:
            # The binds are made even when a later step fails or the Lease is lost: the
            # summary of what the cycle did keeps them.
            elapsed = time.monotonic() - cycle.began
            self.recent.append(CycleSummary(cycle.cycle_id, tuple(sorted(bound)), elapsed))

    async def _after_binds(
        self, cycle: _Decided, bound: Mapping[str, Assumed], started: set[str]
    ) -> None:
        """Evictions, timestamps, reservations; status and events start, to go out while
        the next cycle runs. `started`: the groups of the pods bound (`_bind`)."""
        timings, result, snapshot, view = cycle.timings, cycle.result, cycle.snapshot, cycle.view
        self._still_leading("evict")
        with _timed(timings, "evict"):
            await self._evict(result, snapshot)
        self._still_leading("stamps")
        with _timed(timings, "stamps"):
            await self._stamps.publish(
                view.pod_groups,
                result.stamps,
                started,
                cycle.grouping.stamped,
                self._grouper.owed_groups,
            )
        after = self._after_snapshots.snapshot(snapshot, bound)
        shares = self._after_binds_memo.queue_shares(after)
        burst_continues = cycle.plans.burst_continues
        decisions = statuses_to_write(result.groups, burst_continues)
        self._metrics.forget_pod_groups(view.pod_groups.keys())
        if self._unserved is not None:
            with _timed(timings, "unserved-pools"):
                await self._unserved.report(self._cache.whole_view(), cycle.now)
        self._still_leading("gpu-sharing")
        with _timed(timings, "gpu-sharing"):
            await self._tend_reservations()
        # Status and events go out while the next cycle plans and binds (kai.operator.burst);
        # one cycle's at a time, in order, and a failure there fails the next cycle.
        with _timed(timings, "previous-status"):
            await self._previous_status_done()
        self._trailing = asyncio.ensure_future(
            self._publish(after, shares, decisions, result.changes, cycle.now, burst_continues)
        )
        elapsed = time.monotonic() - cycle.began
        self._record(timings, elapsed, shares, result.groups, result.changes)
        log.info(
            "cycle",
            cycle=cycle.cycle_id,
            pods=len(snapshot.pods),
            groups=len(snapshot.pod_groups),
            bound=len(bound),
            answer=result.report.answer,
            ms={step: round(seconds * 1000, 1) for step, seconds in timings.items()},
            total_ms=round(elapsed * 1000, 1),
        )
        waits_on_leases = self._unserved is not None and self._unserved.waits_on_leases
        # Every cycle, so that each snapshot's account of its changes follows the last.
        time_rule_due = self._time_rules.next_change(snapshot, self._engine.evictions)
        if (
            _decided_nothing(result, cycle.plans)
            and not self._assumed
            and not cycle.overlay.held
            and not waits_on_leases
        ):
            self._quiet = Quiet(
                view.revision,
                cycle.failed_before,
                time_rule_due,
                time.monotonic() + self._quiet_recheck,
            )
        self.cycles += 1

    async def _previous_status_done(self) -> None:
        """Wait for the last cycle's status and events; raised once, a failure there fails
        this cycle and not every cycle after it."""
        trailing, self._trailing = self._trailing, None
        if trailing is not None:
            await trailing

    async def _publish(
        self,
        after: Snapshot,
        shares: Mapping[str, QueueShare],
        decisions: Mapping[str, GroupDecision],
        changes: DecisionChanges,
        now: datetime,
        burst_continues: bool,
    ) -> None:
        """A cycle's status and events, against the cache as it is when they are written;
        nothing once the Lease is lost (a replica that does not lead writes nothing). While
        a burst continues, its Scheduled events wait for its end (kai.operator.events)."""
        if self._is_leader():
            await self._status.publish(self._cache.view(), after, shares, decisions, now, changes)
        if self._is_leader():
            await self._events.flush(burst_continues)
        else:
            self._events.discard()

    async def _bind(
        self,
        result: CycleResult,
        snapshot: Snapshot,
        view: ClusterView,
        annotations: Annotations,
        after: asyncio.Event | None = None,
        answered: asyncio.Event | None = None,
    ) -> tuple[dict[str, Assumed], set[str]]:
        """The pods bound, and their groups (those the snapshot has: a resent bind's pod may
        be gone)."""
        # Every cycle, before its first await: cycles reach this in order, so each update
        # is told what changed since the last (a handed-over cycle's rest runs later on).
        objects = self._objects
        objects.update(snapshot)
        gangs = {objects.pods[b.pod].group for b in result.bindings if b.pod in objects.pods}
        # the binder reads the gangs it binds, all their pods
        pods = {pod.key: pod for gang in gangs for pod in objects.of_group(gang)}
        groups = {key: objects.groups[key] for key in gangs if key in objects.groups}
        resends = {uid: held.resend for uid, held in self._assumed.items() if held.resend}
        may_bind = [*(b.pod for b in result.bindings), *(job.pod.key for job in resends.values())]
        group_of = {key: objects.pods[key].group for key in may_bind if key in objects.pods}
        reservations = dict(self._sharing_facts_of(view.pods).reservations)  # binds await
        report = await self._binder.bind(
            result.bindings,
            pods,
            groups,
            view.pods,
            reservations,
            annotations,
            list(resends.values()),
            after,
            answered,
            view.volume_objects,
            snapshot.nodes,
        )
        for uid in resends:  # settled, or held again in the report (or pruned meanwhile)
            self._assumed.pop(uid, None)
        self._assumed.update(report.held)
        self._metrics.record_binds(len(report.bound), len(report.failed), len(report.unknown))
        return report.bound, {group_of[key] for key in report.bound if key in group_of}

    async def _evict(self, result: CycleResult, snapshot: Snapshot) -> None:
        if not result.evictions or not self._is_leader():
            return
        pods = {pod.key: pod for pod in snapshot.pods}
        evicted = set(await self._binder.evict(result.evictions, pods))
        for eviction in result.evictions:
            if eviction.pod in evicted:
                namespace, _, name = eviction.group.partition("/")
                self._metrics.evicted(name, namespace)

    def _prune_assumed(self, view: ClusterView) -> None:
        """Forget binds the cache now shows, and those whose pod (by uid) is gone."""
        self._assumed = still_held(self._assumed, view.pods)
        if self._backoff:  # the uids of thousands of pods, only when a bind failed
            self._backoff.forget_missing(
                {str((pod.get("metadata") or {}).get("uid")) for pod in view.pods.values()}
            )

    async def _tend_reservations(self) -> None:
        """Collect reservation pods nobody uses and publish devices to pods, on a fresh view."""
        facts = self._sharing_facts_of(self._cache.view().pods)
        reservations = dict(facts.reservations)  # copies: the writes below await
        self._sharing.forget_created(reservations)
        in_use = facts.in_use
        in_use.update(g for entry in self._assumed.values() for g in entry.placement.gpu_groups)
        # A later cycle's binds may be going out meanwhile (a burst's), its devices' too.
        in_use.update(g for placement in self._binding().values() for g in placement.gpu_groups)
        await self._sharing.collect_garbage(reservations, in_use)
        await self._sharing.publish_devices(dict(facts.waiting), reservations)

    def _sharing_facts_of(self, pods: Mapping[str, Mapping[str, Any]]) -> SharingFacts:
        """The GPU-sharing facts of `pods`, kept up to date from what changed."""
        facts = self._sharing_facts
        if facts is None:
            facts = self._sharing_facts = SharingFacts(self._sharing.namespace)
        facts.update(pods)
        return facts

    def _record(
        self,
        timings: Mapping[str, float],
        elapsed: float,
        shares: Mapping[str, QueueShare],
        decisions: Mapping[str, GroupDecision],
        changes: DecisionChanges,
    ) -> None:
        self._metrics.record_cycle(timings, elapsed, self._cache.relists, self._events.dropped)
        # A cycle that finishes after the Lease was lost must not bring back the series
        # `Metrics.leading` dropped: another replica now reports the queues.
        if self._is_leader():
            self._metrics.record_queues(shares)
            self._metrics.record_pending(decisions, changes)


@dataclasses.dataclass(frozen=True, eq=False)
class _Handoff:
    """A cycle that returned once it had decided, its binds handed over: what it lays over
    the next cycle's cache until its binds and grouping writes are done."""

    plans: dict[str, PodGroupPlan]
    binding: dict[str, Assumed]
    after: asyncio.Event | None
    """Set once the previous handed-over cycle's binds are done: its own go out then."""
    binds_done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    answered: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    """Set once its first bind is settled (or it had none). The next cycle plans after:
    a burst's first binds open the connections they go out on, and the next cycle's
    engine, on its own thread but under the same interpreter lock, held them up by 0.3 s
    (the first of 500 answered 0.43 s after it was sent, the next 468 within 0.35 s)."""


async def _done(handoff: _Handoff | None) -> None:
    if handoff is not None:
        await handoff.binds_done.wait()


async def _first_answer(handoff: _Handoff, tail: asyncio.Future[None]) -> None:
    """Until the handoff's first bind is settled, or its rest ended without one."""
    answered = asyncio.ensure_future(handoff.answered.wait())
    try:
        await asyncio.wait((answered, tail), return_when=asyncio.FIRST_COMPLETED)
    finally:
        answered.cancel()


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@dataclasses.dataclass(frozen=True)
class _Decided:
    """A cycle whose engine has decided, and what carrying its decisions out needs."""

    cycle_id: str
    began: float
    timings: dict[str, float]
    failed_before: int
    now: datetime
    view: ClusterView
    plans: Plans
    overlay: Overlay
    snapshot: Snapshot
    result: CycleResult
    grouping: GroupWrites
    writes: contextlib.AsyncExitStack
    """Holds `grouping` open: its writes are awaited when the binds are done."""


def _binds_only(result: CycleResult, plans: Plans) -> bool:
    """Whether the next cycle may plan and decide while this one's binds go out: it binds
    every pod it grouped and decided nothing else (no eviction, no pipelined pod), so
    laying its plans and binds over the cache shows the next cycle all it did."""
    bound = {binding.pod for binding in result.bindings}
    return (
        not result.evictions
        and not result.pipelined
        and not plans.retrying
        and plans.new.keys() <= bound
    )


def _hands_over(result: CycleResult, plans: Plans) -> bool:
    """Whether the cycle returns once it has decided, its binds going on while the next
    cycle plans: it binds only pods it grouped (`_binds_only`), and either the burst goes
    on, or it binds something and its only timestamps ride on its group creates (a
    stream's cycle: each new pod its own group). Not the cycle that ends a burst: the next
    one would plan beside its thousands of binds, from a cache each of them changes, and
    hold them up (0.3 s of planning beside 4,500 binds in `bench/e2e.py`)."""
    if not _binds_only(result, plans):
        return False
    if plans.burst_continues:
        return True
    return bool(result.bindings) and not plans.ends_burst and _stamps_ride_on_creates(result, plans)


def _stamps_ride_on_creates(result: CycleResult, plans: Plans) -> bool:
    """Whether the cycle's only timestamps are the starts of groups it creates, which their
    creates carry: a next cycle that plans before the rest of this one has written its
    stamps misses none of them."""
    created = {plan.key for plan in plans.new.values()}
    return all(
        key in created and stamp.stale_since is None and stamp.last_eviction is None
        for key, stamp in result.stamps.items()
    )


def _decided_nothing(result: CycleResult, plans: Plans) -> bool:
    """No bind, eviction or timestamp, and no pod grouped or waiting to be: the same
    cluster at a later time decides the same, but for the engine's time rules."""
    return not (
        result.bindings
        or result.evictions
        or result.stamps
        or plans.new
        or plans.written
        or plans.deferred
    )


def _lease_lost(error: Exception) -> bool:
    """Whether the cycle stopped because the Lease was lost (raised inside a task group, too)."""
    if isinstance(error, ExceptionGroup):
        return error.subgroup(LeadershipLostError) is not None
    return isinstance(error, LeadershipLostError)


@contextlib.contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    began = time.monotonic()
    try:
        yield
    finally:
        timings[step] = time.monotonic() - began
