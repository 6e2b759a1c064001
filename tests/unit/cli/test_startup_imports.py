"""`kai --help` and the commands that need no solver or cluster do not load them.

Every sub-command used to import the operator, the engine with OR-Tools and the
Kubernetes client before parsing its arguments, so `kai --help` took 1-2 s. Checked in a
fresh interpreter by the modules it loaded, not by the time it took.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "ortools",
    "kubernetes_asyncio",
    "aiohttp",
    "kopf",
    "kai.engine.cycle",
    "kai.operator.app",
)
CATALOG = Path(__file__).parents[3] / "kai" / "workloads" / "catalog"

_PROBE = """
import json, sys
from kai.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
heavy = [name for name in {heavy!r} if name in sys.modules]
print(json.dumps({{"code": code, "loaded": heavy}}))
"""


def _loaded(*argv: str) -> tuple[object, list[str]]:
    probe = _PROBE.format(heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], report["loaded"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["webhook", "--help"],
        ["simulate", "--help"],
        ["queues", "--help"],
        ["why", "--help"],
        ["nodes", "--help"],
        ["workload", "get", "--help"],
        ["workload", "describe", "--help"],
        ["workload", "definitions", "--help"],
    ],
)
def test_help_loads_neither_the_solver_nor_the_kubernetes_client(argv: list[str]) -> None:
    code, loaded = _loaded(*argv)
    assert code == 0
    assert loaded == []


def test_validating_a_definition_file_loads_neither() -> None:
    definition = min(CATALOG.glob("*.yaml"))
    code, loaded = _loaded("workload", "validate", str(definition))
    assert code == 0
    assert loaded == []


def test_describing_a_manifest_loads_neither() -> None:
    manifest = Path(__file__).parents[2] / "fixtures" / "workloads" / "jobset.yaml"
    code, loaded = _loaded("workload", "describe", "-f", str(manifest))
    assert code == 0
    assert loaded == []
