"""OR-Tools is loaded by the first cycle that needs the solver, not by the scheduler's start.

Importing it (with the pandas it pulls in) took 0.7-1 s of a live scheduler's start,
before its first bind, though the cycles of a burst that greedy places whole never
solve anything. Checked in a fresh interpreter by the modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]

_PROBE = """
import json, sys
import kai.operator.app
from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import group, node, pod, queue, snapshot

loaded = {"start": "ortools" in sys.modules}
fits = snapshot([node("n1", gpus=8)], [pod("a", "g", gpus=2)], [group("g", "q")], [queue("q")])
placed = run_cycle(fits, EngineConfig(time_limit_seconds=1, solver_workers=1))
loaded["greedy-placed-all"] = "ortools" in sys.modules
too_big = snapshot(
    [node("n1", gpus=8)],
    [pod("b", "h", gpus=2), pod("c", "i", gpus=16)],
    [group("h", "q"), group("i", "q")],
    [queue("q")],
)
pending = run_cycle(too_big, EngineConfig(time_limit_seconds=1, solver_workers=1))
loaded["work-left"] = "ortools" in sys.modules
bound = [b.pod for b in placed.bindings] + [b.pod for b in pending.bindings]
print(json.dumps({"loaded": loaded, "bound": bound, "answer": pending.report.answer}))
"""


def test_ortools_is_imported_only_when_a_cycle_leaves_work_for_the_solver() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, cwd=ROOT
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["bound"] == ["ns/a", "ns/b"]
    assert report["loaded"] == {"start": False, "greedy-placed-all": False, "work-left": True}
