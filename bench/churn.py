"""Churn benchmark: what the cycles undo of each other, over rounds as `kai simulate` runs them.

KAI's rule is that no decision is undone by the next cycle: a reclaimed gang is not bound
back ahead of its reclaimer, a pod is not evicted twice for the same room. One cycle
cannot show it. This runs `kai.simulate.rounds.simulate` on the synthetic cluster
(`bench.synthetic`), the engine as `kai run` configures it and, in the same run, with the
solver off. It counts per run: evictions, and those of pods the run itself started; pods
evicted more than once; pods placed and taken back before binding, and those taken back
more than once; what the last three rounds still evict; the GPUs running at the end, and
how far the leaf queues below their fair share are from it (fewer evictions must not buy
less fairness); the reclaim and preempt decisions whose preemptor the next round did not
bind (its victims are gone by then, here), and of those, the ones whose victims the next
round bound back while their preemptor still waited.

    python bench/churn.py --nodes 100 [--rounds 10] [--seed 1] [--time-limit 1.0] [--json]
    python bench/churn.py --all [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

# `python bench/churn.py` puts bench/ on the import path, not the checkout that holds it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_float, positive_int
from bench.synthetic import ClusterSpec, synthetic_cluster
from kai.engine.accounting import queue_shares
from kai.engine.cycle import CycleResult
from kai.engine.evictions.decisions import Action
from kai.engine.model import EngineConfig, PodPhase, Snapshot
from kai.simulate.rounds import simulate

MATRIX = (100, 500, 1000)
LAST_ROUNDS = 3

Document = dict[str, Any]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    sizes = MATRIX if args.all else (args.nodes,)
    results = [measure(nodes, args.rounds, args.seed, args.time_limit) for nodes in sizes]
    document: Document = {"bench": "churn", "matrix": results} if args.all else results[0]
    print(json.dumps(document) if args.json else format_table(results))
    return 0


def measure(nodes: int, rounds: int, seed: int, time_limit: float) -> Document:
    snapshot = synthetic_cluster(ClusterSpec(nodes, nodes * 10, seed))
    runs = {}
    for name, config in (
        ("greedy", EngineConfig(time_limit_seconds=0)),
        ("engine", EngineConfig(time_limit_seconds=time_limit, isolate_solver=True)),
    ):
        print(f"[{nodes} nodes] {name}: {rounds} rounds", file=sys.stderr, flush=True)
        simulation = simulate(snapshot, rounds, config)
        runs[name] = churn(snapshot, simulation.rounds, simulation.final)
    return {"bench": "churn", "nodes": nodes, "rounds": rounds, "seed": seed, **runs}


def churn(start: Snapshot, rounds: Sequence[CycleResult], final: Snapshot) -> Document:
    """The counts of one run of rounds from `start` (see the module's docstring)."""
    started: set[str] = set()
    of_started = 0
    for result in rounds:
        of_started += sum(1 for eviction in result.evictions if eviction.pod in started)
        started.update(binding.pod for binding in result.bindings)
    evicted = Counter(record.pod for result in rounds for record in result.evictions)
    taken = Counter(record.pod for result in rounds for record in result.taken_back)
    made = waited = undone = 0
    for result, after in itertools.pairwise(rounds):
        bound_after = {binding.pod for binding in after.bindings}
        groups_bound_after = {pod.group for pod in start.pods if pod.key in bound_after}
        for victim, preemptor in {
            (eviction.group, eviction.preemptor)
            for eviction in result.evictions
            if eviction.action in (Action.RECLAIM, Action.PREEMPT)
        }:
            made += 1
            waited += preemptor not in groups_bound_after
            undone += victim in groups_bound_after and preemptor not in groups_bound_after
    return {
        "evictions": sum(len(result.evictions) for result in rounds),
        "takenBack": sum(len(result.taken_back) for result in rounds),
        "evictionsOfPodsStartedInTheRun": of_started,
        "podsEvictedMoreThanOnce": sum(1 for count in evicted.values() if count > 1),
        "podsTakenBackMoreThanOnce": sum(1 for count in taken.values() if count > 1),
        "lastRoundsEvictions": [len(result.evictions) for result in rounds[-LAST_ROUNDS:]],
        "gpusRunningAtEnd": sum(pod.gpu.whole for pod in final.pods if pod.phase is PodPhase.BOUND),
        "gpusShortOfFairShareAtEnd": short_of_fair_share(final),
        "decisions": made,
        "decisionsWaitingNextRound": waited,
        "decisionsUndoneNextRound": undone,
    }


def short_of_fair_share(snapshot: Snapshot) -> float:
    """GPUs the leaf queues below their fair share lack to reach it, summed (parents hold
    their children's totals, so only leaves count)."""
    parents = {queue.parent for queue in snapshot.queues if queue.parent}
    short = Fraction(0)
    for name, share in queue_shares(snapshot).items():
        if name not in parents and share.allocated.gpu < share.fair_share.gpu:
            short += share.fair_share.gpu - share.allocated.gpu
    return round(float(short), 1)


def format_table(results: Sequence[Document]) -> str:
    header = (
        "nodes  run     evictions  of pods it started  pods evicted 2+  taken back  "
        "pods taken back 2+  last rounds  GPUs running  short of fair share  "
        "waited / undone / decisions"
    )
    lines = [header]
    for result in results:
        for name in ("engine", "greedy"):
            run = result[name]
            last = ",".join(str(count) for count in run["lastRoundsEvictions"])
            lines.append(
                f"{result['nodes']:>5}  {name:<6}  {run['evictions']:>9}  "
                f"{run['evictionsOfPodsStartedInTheRun']:>18}  "
                f"{run['podsEvictedMoreThanOnce']:>15}  {run['takenBack']:>10}  "
                f"{run['podsTakenBackMoreThanOnce']:>18}  {last:>11}  "
                f"{run['gpusRunningAtEnd']:>12}  {run['gpusShortOfFairShareAtEnd']:>19}  "
                f"{run['decisionsWaitingNextRound']:>6} / {run['decisionsUndoneNextRound']} / "
                f"{run['decisions']}"
            )
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=positive_int, default=100)
    parser.add_argument("--rounds", type=positive_int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=positive_float, default=1.0)
    parser.add_argument("--all", action="store_true", help="100, 500 and 1,000 nodes")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
