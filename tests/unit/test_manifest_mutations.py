"""Bad input gets a clear error and breaks nothing: random edits of the demo cluster's manifests.

Each example changes one to three values anywhere in the demo cluster (a field deleted,
or set to a value of another type or an odd string), as a careless edit would. Either
`kai simulate`'s loader rejects the files, one line per problem naming the file, or the
cycles run. Nothing raises anything else. (An unsupported object whose metadata was a
string once ended `kai simulate` with a traceback, found this way with many more
examples; `tests/scenarios/invalid/unsupported_kinds.yaml` pins it.)
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.engine.model import EngineConfig
from kai.simulate.report import build_document, render
from kai.simulate.rounds import simulate
from kai.simulate.scenario import InvalidScenarioError, load_scenario
from tests.unit.manifest_edits import edit_carelessly

DEMO = Path(__file__).parents[2] / "examples" / "demo-cluster.yaml"
DOCUMENTS = [doc for doc in yaml.safe_load_all(DEMO.read_text()) if doc]
ODD_VALUES: list[Any] = [
    None, 0, -1, 2, 1.5, True, "", "x", "-3", "0.5", "100m", "1Gi", "999999999999",
    "2026-13-45T99:00:00Z", "a/b", [], {}, ["x"], [{}],
]  # fmt: skip
SOURCE = "demo.yaml"


@st.composite
def _edited(draw: st.DrawFn) -> list[Any]:
    documents = copy.deepcopy(DOCUMENTS)
    edit_carelessly(draw, documents, ODD_VALUES)
    return documents


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edited())
def test_edited_manifests_are_rejected_line_by_line_or_scheduled(documents: list[Any]) -> None:
    try:
        snapshot = load_scenario(
            [(SOURCE, doc) for doc in documents], datetime(2026, 12, 7, tzinfo=UTC)
        )
    except InvalidScenarioError as error:
        lines = str(error).splitlines()
        assert lines and all(line.startswith(f"{SOURCE}: ") for line in lines), lines
        return
    config = EngineConfig(time_limit_seconds=0, reproducible=True)
    assert render(build_document(simulate(snapshot, 2, config)), "json")
