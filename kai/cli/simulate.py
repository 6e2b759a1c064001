"""`kai simulate FILE... [--rounds N] [--now RFC3339] [-o table|json|yaml] [--time-limit S]`.

Exit status per the contract: 0 when the simulation ran, 2 for invalid input
(one line per problem on stderr, nothing on stdout), 1 for an internal error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from datetime import UTC, datetime

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
        help="solver time per cycle, seconds (0: greedy only)",
    )
    parser.add_argument(
        "--placement", choices=[s.value for s in PlacementStrategy], default="binpack"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # see kai/cli/main.py: the engine and the simulator are imported when run
    from kai.simulate.inputs import InputError, read_documents
    from kai.simulate.report import build_document, render
    from kai.simulate.rounds import simulate
    from kai.simulate.scenario import InvalidScenarioError, load_scenario

    try:
        now = _timestamp(args.now) if args.now else datetime.now(UTC)
    except ValueError as error:
        print(f"--now: {error}", file=sys.stderr)
        return EXIT_INVALID
    try:
        snapshot = load_scenario(read_documents(args.files), now)
    except (InputError, InvalidScenarioError) as error:
        print(str(error), file=sys.stderr)
        return EXIT_INVALID
    config = EngineConfig(
        time_limit_seconds=args.time_limit, placement_strategy=PlacementStrategy(args.placement)
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
