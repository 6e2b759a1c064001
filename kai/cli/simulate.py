"""`kai simulate FILE... [--rounds N] [--now RFC3339] [-o table|json|yaml] [--time-limit S]`.

`--node-pool POOL` simulates one shard of a multi-pool cluster (`kai.simulate.shard`).

Exit status per the contract: 0 when the simulation ran, 2 for invalid input
(one line per problem on stderr, nothing on stdout), 1 for an internal error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from datetime import UTC, datetime

from kai.api.shards import NODE_POOL_LABEL_KEY
from kai.engine.model import EngineConfig, PlacementStrategy

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "simulate", help="run the scheduling engine on a cluster described in YAML files"
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files; - reads stdin")
    parser.add_argument("--rounds", type=_positive, default=1, help="scheduling cycles to run")
    parser.add_argument("--now", help="simulated wall clock, RFC 3339 (default: now)")
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=1.0,
        help="solver time per cycle, seconds, counted as the solver's work: the same "
        "input decides the same on a loaded machine, which may take longer (0: greedy only)",
    )
    parser.add_argument(
        "--placement", choices=[s.value for s in PlacementStrategy], default="binpack"
    )
    parser.add_argument(
        "--node-pool",
        default=None,
        help="simulate one shard: the objects with this node-pool label value "
        "(default: all; '' for the default shard, those without the label)",
    )
    parser.add_argument(
        "--node-pool-label",
        default=NODE_POOL_LABEL_KEY,
        help=f"the label naming an object's node pool (default {NODE_POOL_LABEL_KEY})",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # see kai/cli/main.py: the engine and the simulator are imported when run
    from kai.simulate.inputs import InputError, read_documents
    from kai.simulate.report import build_document, render
    from kai.simulate.rounds import simulate
    from kai.simulate.scenario import InvalidScenarioError, load_scenario
    from kai.simulate.shard import Shard, shard_documents

    try:
        now = _timestamp(args.now) if args.now else datetime.now(UTC)
    except ValueError as error:
        print(f"--now: {error}", file=sys.stderr)
        return EXIT_INVALID
    try:
        documents = read_documents(args.files)
        if args.node_pool is not None:
            documents = shard_documents(
                documents, Shard(args.node_pool or None, args.node_pool_label)
            )
        snapshot = load_scenario(documents, now, args.node_pool_label)
    except (InputError, InvalidScenarioError) as error:
        print(str(error), file=sys.stderr)
        return EXIT_INVALID
    config = EngineConfig(  # the same input prints the same bytes, however loaded the machine
        time_limit_seconds=args.time_limit,
        placement_strategy=PlacementStrategy(args.placement),
        reproducible=True,
    )
    try:
        document = build_document(simulate(snapshot, args.rounds, config))
    except Exception:  # an engine failure is a bug: report it as such, never as a result
        traceback.print_exc()
        return EXIT_INTERNAL
    sys.stdout.write(render(document, args.output))
    return EXIT_OK


def _timestamp(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (RFC 3339 needs one, e.g. Z)")
    return moment


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
