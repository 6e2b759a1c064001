"""Everything `kai run` can be told, in one immutable object the other modules receive."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kai.api.constants import RESERVATION_NAMESPACE
from kai.api.shards import NODE_POOL_LABEL_KEY, Shard
from kai.engine.model import STUCK_IN_RELEASING_SECONDS

DEFAULT_RESERVATION_NAMESPACE = RESERVATION_NAMESPACE
DEFAULT_NAMESPACE = "kai-scheduler"
QUIET_RECHECK_SECONDS = 10.0
"""How often a quiet cluster gets a full cycle all the same (kai.operator.loop)."""
BURST_GROWTH = 16
"""What each later cycle of a burst takes on at most, as a multiple of `burst_pods`
(kai.operator.burst)."""


def default_identity() -> str:
    """The pod name in a cluster (HOSTNAME), plus a suffix so a restarted process is a new holder."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def default_namespace() -> str:
    """The namespace the operator runs in (POD_NAMESPACE from the downward API), for its Lease."""
    return os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE


@dataclass(frozen=True)
class OperatorConfig:
    kubeconfig: Path | None = None
    period_seconds: float = 1.0
    """A cycle runs at least this often."""
    debounce_seconds: float = 0.05
    """After a relevant change, wait this long for more before running a cycle early."""
    time_limit_seconds: float = 1.0
    """The engine's solver budget per cycle (0: greedy only)."""
    placement: str = "binpack"
    """KAI's placement strategy: `binpack` (fullest nodes and devices first) or `spread`."""
    solver_workers: int = 2
    metrics_port: int = 8080
    """/metrics, /healthz and /readyz; 0 picks a free port, -1 serves nothing."""
    metrics_host: str = "0.0.0.0"
    serve_healthz: bool = True
    """Liveness on the metrics port too; `kai run` leaves it to kopf's probe endpoint."""
    burst_pods: int = 500
    """New pods a burst's first cycle groups and schedules at most; the rest go to the next
    cycles, each taking on up to `BURST_GROWTH` times as many (0: no bound)."""
    bind_concurrency: int = 32
    write_concurrency: int = 32
    namespace: str = field(default_factory=default_namespace)
    identity: str = field(default_factory=default_identity)
    leader_election: bool = True
    lease_name: str = "kai-scheduler"
    """The default shard's Lease; a pool's shard holds `<lease_name>-<pool>`."""
    node_pool: str | None = None
    """The shard: nodes, queues and PodGroups with this node-pool label value (None: unlabelled)."""
    node_pool_label: str = NODE_POOL_LABEL_KEY
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0
    reservation_namespace: str = DEFAULT_RESERVATION_NAMESPACE
    reservation_image: str = "registry.k8s.io/pause:3.10"
    reservation_runtime_class: str | None = "nvidia"
    watch_seconds: int = 300
    events_per_cycle: int = 500
    quiet_recheck_seconds: float = QUIET_RECHECK_SECONDS
    """With nothing changed since a cycle that decided nothing, cycles are skipped; a full
    one still runs this often."""
    failed_cycles_unhealthy: int = 5
    """/healthz fails after this many failed cycles in a row, until a cycle succeeds."""
    stuck_in_releasing_seconds: float = STUCK_IN_RELEASING_SECONDS
    """KAI's `--stuck-in-releasing-threshold`: how long after its deletion a running pod's
    room stops being offered to pending gangs (it is stuck, not leaving)."""

    @property
    def shard(self) -> Shard:
        return Shard(self.node_pool or None, self.node_pool_label)
