"""`kai run` makes the cyclic garbage collector run less often before it starts the operator.

With CPython's default threshold the collector took a quarter of each cycle of a
burst (kai.operator.gc_tuning); this checks that the scheduler's process gets the
raised threshold, not only that the function sets it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kai.cli.main import build_parser
from kai.operator import hosting
from kai.operator.config import OperatorConfig
from kai.operator.gc_tuning import YOUNG_COLLECTION_THRESHOLD


@pytest.fixture
def restored_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        yield before
    finally:
        gc.set_threshold(*before)


def test_kai_run_raises_the_young_threshold_before_the_operator_starts(
    monkeypatch: pytest.MonkeyPatch, restored_thresholds: tuple[int, int, int]
) -> None:
    seen: list[tuple[int, int, int]] = []

    async def operator_stand_in(config: OperatorConfig, liveness: str | None) -> int:
        seen.append(gc.get_threshold())
        return 0

    monkeypatch.setattr(hosting, "run_hosted", operator_stand_in)
    args = build_parser().parse_args(["run", "--no-leader-election"])
    assert args.handler(args) == 0
    _, older, oldest = restored_thresholds
    assert seen == [(YOUNG_COLLECTION_THRESHOLD, older, oldest)]
