"""Running the engine so that one group whose data trips it cannot stop the cycle for the others.

`run_cycle` raises when its own validator rejects every answer (`EngineInvariantError`)
or when a bug meets data it does not expect. Such a failure is usually caused by one
group's pods; failing the whole cycle would leave every other pending pod unbound
for as long as that group exists. So when the engine raises, the cycle is tried
again with groups' pending pods left out, bisecting over the groups with pending
pods, to find the groups whose presence makes it fail. Those are set aside (an
`EngineInvariantViolated` reason on their status, and an event), everyone else is
scheduled in the same cycle. The search assumes a failure needs one bad group (not
a combination) and is bounded: when its probes run out, every group still
suspected is set aside, which errs on the side of scheduling the innocent rest.
A failure that persists with every pending pod left out is not any group's: it
is raised, and the cycle counts as failed.

This runs on the engine's worker thread, like `run_cycle` itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import structlog

from kai.engine.cycle import CycleResult, run_cycle
from kai.engine.memo import SnapshotMemo
from kai.engine.model import EngineConfig, PodPhase, SetAside, Snapshot

log = structlog.get_logger(__name__)

Engine = Callable[[Snapshot, EngineConfig], CycleResult]
"""What a cycle runs: `kai.engine.cycle.run_cycle`, the seam where tests inject a fault."""


def remembering_engine() -> Engine:
    """`run_cycle` with one memo for its lifetime: each cycle pays for what changed since
    the last (the snapshot builder keeps the objects of what did not)."""
    memo = SnapshotMemo()
    return lambda snapshot, config: run_cycle(snapshot, config, memo)


ENGINE_INVARIANT_VIOLATED = "EngineInvariantViolated"
MAX_PROBES = 12
"""Engine runs the search may make; one bad group among n costs about 2·log2(n)."""
_MESSAGE_LIMIT = 400


@dataclass(frozen=True)
class Isolated:
    result: CycleResult
    culprits: tuple[str, ...]
    """The groups set aside because the engine fails with them (none when it did not fail)."""


def run_isolating(
    engine: Engine, snapshot: Snapshot, config: EngineConfig, last_culprits: Collection[str] = ()
) -> Isolated:
    """The engine's result, with the groups that make it raise set aside; raises if none do.

    The whole snapshot is always tried first, so a group whose data was fixed is
    scheduled again; when that fails, the groups set aside last cycle (`last_culprits`)
    are tried first, so a group that stays broken costs one more engine run, not a search.
    """
    try:
        return Isolated(engine(snapshot, config), ())
    except Exception as error:
        failure = error
    message = f"the scheduler's engine fails with this group in the cycle: {failure}"
    message = message[:_MESSAGE_LIMIT]
    suspects = sorted(
        {pod.group for pod in snapshot.pods if pod.phase is PodPhase.PENDING}
        - {item.group for item in snapshot.set_aside}
    )
    again = [group for group in suspects if group in set(last_culprits)]
    if again:
        try:
            return Isolated(engine(_without(snapshot, again, again, message), config), tuple(again))
        except Exception:
            log.info("the engine fails for more than last cycle's groups; searching them all")
    search = _Search(engine, snapshot, config, suspects)
    if search.fails(()):
        raise failure  # it fails with no group's pending pods in it: not a group's doing
    culprits = search.culprits(suspects)
    log.error(
        "groups set aside: the engine fails with them",
        groups=culprits,
        probes=search.probes,
        error=str(failure),
    )
    return Isolated(
        engine(_without(snapshot, culprits, culprits, message), config), tuple(culprits)
    )


class _Search:
    def __init__(
        self, engine: Engine, snapshot: Snapshot, config: EngineConfig, suspects: Sequence[str]
    ) -> None:
        self._engine = engine
        self._snapshot = snapshot
        self._config = config
        self._suspects = suspects
        self.probes = 0

    def fails(self, included: Collection[str]) -> bool:
        """Whether the engine raises with only `included`'s pending pods (of the suspects)."""
        self.probes += 1
        left_out = [group for group in self._suspects if group not in included]
        try:
            self._engine(_without(self._snapshot, left_out, (), ""), self._config)
        except Exception:
            return True
        return False

    def culprits(self, failing: Sequence[str]) -> list[str]:
        """The groups of `failing` (a set the engine fails with) that make it fail by themselves."""
        if len(failing) == 1 or self.probes >= MAX_PROBES:
            return list(failing)
        half = len(failing) // 2
        found: list[str] = []
        for part in (failing[:half], failing[half:]):
            if self.probes >= MAX_PROBES:
                found += part  # out of probes: still suspected
            elif self.fails(part):
                found += self.culprits(part)
        return found


def _without(
    snapshot: Snapshot, left_out: Collection[str], culprits: Collection[str], message: str
) -> Snapshot:
    """The snapshot without the pending pods of `left_out`; `culprits` among them are set aside.

    Their PodGroups and running pods stay, so queue accounting and the validator see
    what runs, as for a group in bind backoff.
    """
    left = set(left_out)
    queues = {group.key: group.queue for group in snapshot.pod_groups}
    aside = [
        SetAside(group, queues.get(group, ""), ENGINE_INVARIANT_VIOLATED, message)
        for group in culprits
    ]
    return dataclasses.replace(
        snapshot,
        pods=tuple(
            pod
            for pod in snapshot.pods
            if pod.group not in left or pod.phase is not PodPhase.PENDING
        ),
        set_aside=tuple(sorted((*snapshot.set_aside, *aside), key=lambda item: item.group)),
    )
