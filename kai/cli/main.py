"""Entry point of the `kai` console script: one sub-command per adapter.

Each sub-command's module declares its arguments with light imports only and imports
what it runs (the operator, the engine with OR-Tools, the Kubernetes client) inside its
handler: importing all of them first made `kai --help` take 1-2 s, and a command that
needs none of them (`kai workload validate`) paid for all.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kai import __version__
from kai.cli import live, run, simulate, webhook, workload


def build_parser(prog: str = "kai") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A KAI-compatible GPU scheduler whose cycles are solved with CP-SAT.",
    )
    parser.add_argument("--version", action="version", version=f"kai {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    simulate.add_parser(commands)
    workload.add_parser(commands)
    run.add_parser(commands)
    webhook.add_parsers(commands)
    live.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "kai") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


def kubectl_main() -> int:
    """`kubectl kai ...`: kubectl runs the `kubectl-kai` plugin with the words after `kai`."""
    return main(prog="kubectl kai")


if __name__ == "__main__":
    sys.exit(main())
