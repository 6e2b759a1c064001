"""`kai run [--kubeconfig PATH] [--period 1s] [--time-limit 1.0] [--metrics-port 8080] ...`: the live scheduler.

Runs the scheduler as a kopf operator (`kai.operator.hosting`) until SIGINT or
SIGTERM; on either it releases its leader Lease so a standby replica takes over at
once, and exits 0 (1 if the scheduler failed). Without --kubeconfig it uses the
in-cluster ServiceAccount, then the default kubeconfig. With --node-pool it is one
shard of KAI's node-pool partition (docs/operator.md, "Shards").
"""

from __future__ import annotations

import argparse
import asyncio

from kai.api.durations import parse_duration
from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.cli.arguments import kubeconfig_file
from kai.engine.model import STUCK_IN_RELEASING_SECONDS
from kai.operator.config import (
    BURST_GROWTH,
    DEFAULT_RESERVATION_NAMESPACE,
    QUIET_RECHECK_SECONDS,
    OperatorConfig,
    default_identity,
    default_namespace,
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("run", help="run the scheduler against a cluster")
    parser.add_argument(
        "--kubeconfig", type=kubeconfig_file, help="kubeconfig file (default: in-cluster)"
    )
    parser.add_argument("--period", type=_duration, default=1.0, help="cycle period (default 1s)")
    parser.add_argument(
        "--time-limit", type=float, default=1.0, help="solver seconds per cycle (0: greedy only)"
    )
    parser.add_argument(
        "--placement",
        choices=("binpack", "spread"),
        default="binpack",
        help="KAI's placement strategy: fullest nodes first, or emptiest (default binpack)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="port of /metrics and /readyz (-1: off)",
    )
    parser.add_argument(
        "--liveness-endpoint",
        default="http://0.0.0.0:8081/healthz",
        help="where kopf serves the liveness probe ('' for none)",
    )
    parser.add_argument("--bind-concurrency", type=_positive, default=32)
    parser.add_argument(
        "--write-concurrency",
        type=_positive,
        default=32,
        help="PodGroup, status and event writes in flight at once",
    )
    parser.add_argument(
        "--burst-pods",
        type=int,
        default=500,
        help="new pods a burst's first cycle takes on at most; the rest go to the next cycles,"
        f" each taking on up to {BURST_GROWTH}x as many (0: no bound)",
    )
    parser.add_argument(
        "--quiet-recheck",
        type=_duration,
        default=QUIET_RECHECK_SECONDS,
        help="with nothing changed since a cycle that decided nothing, cycles are skipped;"
        " a full one still runs this often (default 10s)",
    )
    parser.add_argument(
        "--stuck-in-releasing-threshold",
        type=_duration,
        default=STUCK_IN_RELEASING_SECONDS,
        help="KAI's flag: a running pod deleted longer ago than this is stuck, and its room is"
        " not offered to pending pods (default 2m)",
    )
    parser.add_argument(
        "--failed-cycles-unhealthy",
        type=_positive,
        default=5,
        help="/healthz fails after this many failed cycles in a row (default 5)",
    )
    parser.add_argument("--namespace", default=default_namespace(), help="namespace of the Lease")
    parser.add_argument("--identity", default=None, help="leader-election identity")
    parser.add_argument(
        "--lease-name",
        default="kai-scheduler",
        help="the Lease; a --node-pool shard's is suffixed -POOL (default kai-scheduler)",
    )
    parser.add_argument(
        "--node-pool",
        default=None,
        help="schedule only this node pool's nodes, queues and PodGroups "
        "(default: the shard of those without the label)",
    )
    parser.add_argument(
        "--node-pool-label",
        default=NODE_POOL_LABEL_KEY,
        help=f"the label naming an object's node pool (default {NODE_POOL_LABEL_KEY})",
    )
    parser.add_argument("--lease-duration", type=_duration, default=15.0)
    parser.add_argument("--renew-deadline", type=_duration, default=10.0)
    parser.add_argument("--retry-period", type=_duration, default=2.0)
    parser.add_argument(
        "--no-leader-election",
        action="store_true",
        help="schedule without a Lease (one replica only)",
    )
    parser.add_argument("--reservation-namespace", default=DEFAULT_RESERVATION_NAMESPACE)
    parser.add_argument("--reservation-image", default="registry.k8s.io/pause:3.10")
    parser.add_argument("--reservation-runtime-class", default="nvidia", help="'' for none")
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from kai.operator.gc_tuning import collect_less_often  # imported when run (kai/cli/main.py)

    collect_less_often()  # before the imports and the watch cache it would otherwise walk
    from kai.operator.logs import configure  # see kai/cli/main.py: imported when run

    configure(args.log_level)
    config = OperatorConfig(
        kubeconfig=args.kubeconfig,
        period_seconds=args.period,
        time_limit_seconds=args.time_limit,
        placement=args.placement,
        metrics_port=args.metrics_port,
        serve_healthz=False,  # kopf serves liveness at --liveness-endpoint
        bind_concurrency=args.bind_concurrency,
        burst_pods=args.burst_pods,
        write_concurrency=args.write_concurrency,
        failed_cycles_unhealthy=args.failed_cycles_unhealthy,
        quiet_recheck_seconds=args.quiet_recheck,
        stuck_in_releasing_seconds=args.stuck_in_releasing_threshold,
        namespace=args.namespace,
        identity=args.identity or default_identity(),
        leader_election=not args.no_leader_election,
        lease_name=args.lease_name,
        node_pool=args.node_pool or None,
        node_pool_label=args.node_pool_label,
        lease_seconds=args.lease_duration,
        renew_deadline_seconds=args.renew_deadline,
        retry_seconds=args.retry_period,
        reservation_namespace=args.reservation_namespace,
        reservation_image=args.reservation_image,
        reservation_runtime_class=args.reservation_runtime_class or None,
    )
    from kai.operator.hosting import run_hosted  # see kai/cli/main.py: imported when run

    return asyncio.run(run_hosted(config, args.liveness_endpoint or None))


def _duration(text: str) -> float:
    try:
        seconds = float(parse_duration(text)) if not _is_number(text) else float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    if seconds <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return seconds


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
