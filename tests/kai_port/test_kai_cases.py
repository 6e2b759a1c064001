"""KAI's own table-driven action tests (v0.17.0 data), run in-process as kai's acceptance suite.

The cases in cases/ are generated from KAI's Go test tables by convert.py; runner.py runs
each one (one cycle for KAI's action unit tests, KAI's multi-round pattern for its
integration tests) and lists every difference from KAI's expectation. A case that fails
today is listed in known_differences.yaml with the apparent cause and is a strict xfail,
so a case that starts passing makes the list be updated.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.kai_port.runner import case_id, case_paths, check_case, known_differences

PATHS = case_paths()
KNOWN = known_differences()


def _param(path: Path) -> object:
    identifier = case_id(path)
    marks = []
    if identifier in KNOWN:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[identifier]))
    return pytest.param(path, id=identifier, marks=marks)


def test_every_known_difference_names_a_case() -> None:
    identifiers = {case_id(p) for p in PATHS}
    assert sorted(set(KNOWN) - identifiers) == []


@pytest.mark.parametrize("path", [_param(p) for p in PATHS])
def test_kai_case(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    problems = check_case(case)
    assert not problems, f"{case['kai']['testName']!r}:\n  " + "\n  ".join(problems)
