"""How every `kai` command prints: aligned tables for people, JSON or YAML for programs.

One printer for all commands, so `kai workload`, `kai queues`, `kai why` and `kai nodes`
align columns and spell documents the same way (as kubectl does across its commands).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import structlog
import yaml


class _CurrentStderr:
    """Whatever `sys.stderr` is when a line is written, not when logging was set up: a
    command run in process (the tests) must not leave structlog holding a closed stream."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def logs_to_stderr() -> None:
    """Library logs (a retried request) on stderr, warnings only, for commands that talk to a
    cluster: structlog's default prints on stdout, into the middle of `-o json`."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]  # write/flush is all it uses
    )


def table(rows: Sequence[Sequence[str]], out: TextIO, indent: str = "") -> None:
    """Rows as columns two spaces apart, the first row being the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(indent + cells.rstrip() + "\n")


def emit(document: Any, output: str, out: TextIO) -> None:
    """A document as JSON (`output` "json") or YAML (anything else), in its own key order."""
    if output == "json":
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(document, sort_keys=False))
