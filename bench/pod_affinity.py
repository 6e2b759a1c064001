"""What inter-pod anti-affinity costs a cycle: a burst of replicas that avoid each other.

Why: the greedy pass keeps required inter-pod terms pod by pod (`kai.engine.pod_affinity`),
reading the pods on nodes and the cycle's placements before each pod, and the validator
checks them again; a cluster running inference fleets may hold thousands of such pods.
The cluster: nodes of 8 GPUs, each its own `kubernetes.io/hostname` domain; replicas of
`--apps` applications running, one GPU each, every replica avoiding its application's
other replicas on its node; a burst of pending replicas of the same applications. The
same cycle with the terms left out is the baseline, run interleaved in the same process.
With the terms, no two replicas of an application may share a node, which the benchmark
checks on every answer.

    .venv/bin/python bench/pod_affinity.py --nodes 1000 --running 2000 --pending 1000

`--preferred` makes the terms preferences (weight 100), as many charts write them; each
side then reports how many replicas share a node with another of their application
(`sharingANode`), which a requirement never lets happen.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime

from bench.arguments import positive_int
from bench.timing import summarize, timed_cycle
from kai.engine.cycle import CycleResult
from kai.engine.model import (
    UNLIMITED,
    EngineConfig,
    GpuRequest,
    Node,
    Placement,
    Pod,
    PodAffinityTerm,
    PodGroup,
    PodPhase,
    Queue,
    QueueResource,
    Snapshot,
)
from kai.engine.resources import Resources

HOSTNAME = "kubernetes.io/hostname"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
GIB = 2**30
GPUS_PER_NODE = 8


def replicas_apart(
    nodes: int, running: int, pending: int, apps: int, terms: bool, preferred: bool = False
) -> Snapshot:
    """The benchmark's cluster; `terms`: whether the replicas carry their anti-affinity,
    `preferred`: as a preference (weight 100) rather than a requirement."""
    cluster = [
        Node(
            f"n{i}",
            ((HOSTNAME, f"n{i}"),),
            Resources.of(GPUS_PER_NODE, 64_000, 512 * GIB),
            110,
            80_000,
        )
        for i in range(nodes)
    ]
    unlimited = QueueResource(quota=UNLIMITED, limit=UNLIMITED)
    pods, groups = [], []
    placed = _running_apart(nodes, running, apps)
    for index in range(running + pending):
        app = f"app{index % apps}"
        term = PodAffinityTerm(
            True,
            HOSTNAME,
            (("app", app),),
            namespaces=frozenset({"ns"}),
            weight=100 if preferred else 0,
        )
        on = placed[index] if index < running else None
        group = PodGroup("ns", f"r{index}", "q", 1, 50, True, created=NOW)
        groups.append(group)
        pods.append(
            Pod(
                "ns",
                f"r{index}-0",
                f"uid-{index}",
                group.key,
                None,
                PodPhase.BOUND if on else PodPhase.PENDING,
                on,
                Resources.of(0, 1000, GIB),
                GpuRequest(whole=1),
                Placement(),
                created=NOW,
                labels=(("app", app),),
                pod_terms=(term,) if terms and not preferred else (),
                preferred_terms=(term,) if terms and preferred else (),
            )
        )
    queue = Queue("q", None, gpu=unlimited, cpu=unlimited, memory=unlimited)
    return Snapshot(tuple(cluster), tuple(pods), tuple(groups), (queue,), NOW)


def _running_apart(nodes: int, running: int, apps: int) -> list[str]:
    """A node for each running replica (application: index modulo `apps`), round the nodes,
    none holding two replicas of one application or more than its 8 GPUs."""
    held: list[set[int]] = [set() for _ in range(nodes)]
    where, at = [], 0
    for index in range(running):
        app = index % apps
        for step in range(nodes):
            candidate = (at + step) % nodes
            if app not in held[candidate] and len(held[candidate]) < GPUS_PER_NODE:
                break
        else:
            raise SystemExit(f"{running} replicas of {apps} applications do not fit apart")
        held[candidate].add(app)
        where.append(f"n{candidate}")
        at = candidate + 1
    return where


def sharing(snap: Snapshot, result: CycleResult) -> int:
    """How many replicas share a node with another of their application once the answer
    is bound (beyond the first of each application on each node)."""
    where = {p.key: p.node for p in snap.pods if p.node is not None}
    where.update({binding.pod: binding.node for binding in result.bindings})
    apps = {p.key: dict(p.labels)["app"] for p in snap.pods}
    counts = Counter((apps[key], node) for key, node in where.items())
    return sum(count - 1 for count in counts.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=positive_int, default=1000)
    parser.add_argument("--running", type=positive_int, default=2000)
    parser.add_argument("--pending", type=positive_int, default=1000)
    parser.add_argument("--apps", type=positive_int, default=50)
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--preferred", action="store_true", help="the terms as preferences")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    config = EngineConfig()
    sides = {
        terms: replicas_apart(
            args.nodes, args.running, args.pending, args.apps, terms, args.preferred
        )
        for terms in (True, False)
    }
    seconds: dict[bool, list[float]] = {True: [], False: []}
    bound: dict[bool, int] = {}
    shared: dict[bool, int] = {}
    for run in range(args.runs):
        for terms, snap in sides.items():  # interleaved: the machine's load falls on both
            wall, _, result = timed_cycle(snap, config)
            seconds[terms].append(wall)
            bound[terms] = len(result.bindings)
            shared[terms] = sharing(snap, result)
            if terms and shared[terms] and not args.preferred:
                raise SystemExit("two replicas of an application share a node")
        print(f"[pod affinity] run {run + 1}/{args.runs}", file=sys.stderr)
    report = {
        "nodes": args.nodes,
        "running": args.running,
        "pending": args.pending,
        "apps": args.apps,
        "preferred": args.preferred,
        "withTerms": {
            "seconds": summarize(seconds[True]),
            "bound": bound[True],
            "sharingANode": shared[True],
        },
        "withoutTerms": {
            "seconds": summarize(seconds[False]),
            "bound": bound[False],
            "sharingANode": shared[False],
        },
    }
    if args.json:
        print(json.dumps(report))
    else:
        with_terms, without = report["withTerms"], report["withoutTerms"]
        print(
            f"{args.pending} pending replicas beside {args.running} running on {args.nodes} "
            f"nodes, {args.apps} applications: cycle {with_terms['seconds']['median']} s "
            f"median with the terms ({with_terms['bound']} bound, "
            f"{with_terms['sharingANode']} sharing a node with its application), "
            f"{without['seconds']['median']} s without ({without['bound']} bound, "
            f"{without['sharingANode']} sharing)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
