"""An engine that trips an invariant on the data the test puts in the cluster, for the loop's fault tests.

The real engine raises only on its own bugs, which tests cannot summon at will. This
one is `run_cycle` itself, except that it raises `EngineInvariantError` while the
snapshot holds a pending pod whose name starts with `poisoned_prefix` (a failure
its group causes), or a node labelled `poisoned_node_label` (a failure
no group causes). It is passed where the operator takes its engine (`run_engine`),
and the tests drive it only through the objects they create. While `holding`, a
call with pending pods waits before it starts until the test sets `release`, so a
test can act (take the Lease away) while a cycle is inside the engine.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kai.engine.cycle import CycleResult, EngineInvariantError, run_cycle
from kai.engine.model import EngineConfig, PodPhase, Snapshot

HOLD_LIMIT_SECONDS = 120.0
"""A held call gives up waiting after this long, so a failed test never leaves the thread behind."""


@dataclass
class FaultyEngine:
    poisoned_prefix: str = "poisoned-"
    poisoned_node_label: str = "kai.test/poisoned"
    holding: bool = False
    entered: threading.Event = field(default_factory=threading.Event)
    """Set once a call waits (while `holding`)."""
    release: threading.Event = field(default_factory=threading.Event)
    calls: int = 0

    def __call__(self, snapshot: Snapshot, config: EngineConfig) -> CycleResult:
        self.calls += 1
        if self.holding and any(pod.phase is PodPhase.PENDING for pod in snapshot.pods):
            self.entered.set()
            self.release.wait(HOLD_LIMIT_SECONDS)
        if any(node.label(self.poisoned_node_label) is not None for node in snapshot.nodes):
            raise EngineInvariantError(f"a node is labelled {self.poisoned_node_label}")
        poisoned = sorted(
            {
                pod.group
                for pod in snapshot.pods
                if pod.phase is PodPhase.PENDING and pod.name.startswith(self.poisoned_prefix)
            }
        )
        if poisoned:
            raise EngineInvariantError(f"validation failed for {', '.join(poisoned)}")
        return run_cycle(snapshot, config)
