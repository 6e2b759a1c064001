"""The end-to-end benchmark's arithmetic: the run plan interleaves sides, medians and percentiles."""

from __future__ import annotations

from bench.e2e import Side, interleaved, summarize_bursts, summarize_streams
from bench.timing import nearest_rank


def test_sides_alternate_round_by_round() -> None:
    sides = [Side(name, name, name, None) for name in ("kai", "kube", "ceiling")]
    plan = [(run, side.name) for run, side in interleaved(sides, 3)]
    assert plan == [
        (0, "kai"), (0, "kube"), (0, "ceiling"),
        (1, "kai"), (1, "kube"), (1, "ceiling"),
        (2, "kai"), (2, "kube"), (2, "ceiling"),
    ]  # fmt: skip


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert nearest_rank(values, 0.5) == 50.0
    assert nearest_rank(values, 0.99) == 99.0
    assert nearest_rank([3.0, 1.0, 2.0], 0.99) == 3.0  # few samples: the slowest
    assert nearest_rank([7.0], 0.5) == 7.0


def test_a_burst_summary_is_the_median_run() -> None:
    rows = [
        {"seconds": 10.0, "firstBindSeconds": 1.0, "firstBindAfterCycleStartSeconds": 0.5},
        {"seconds": 40.0, "firstBindSeconds": 3.0},  # an outlier does not move the median
        {"seconds": 20.0, "firstBindSeconds": 2.0, "firstBindAfterCycleStartSeconds": 0.7},
    ]
    summary = summarize_bursts(1000, rows)
    assert summary["seconds"] == 20.0
    assert summary["podsBoundPerSecond"] == 50.0
    assert summary["firstBindSeconds"] == 2.0
    assert "firstBindAfterCycleStartSeconds" not in summary  # not every run has it: no median
    assert summary["runs"] == rows


def test_a_stream_summary_takes_each_figure_s_median() -> None:
    rows = [
        {"firstBindSeconds": 0.5, "latencySeconds": {"p50": 0.2, "p99": 1.0, "max": 3.0}},
        {"firstBindSeconds": 0.7, "latencySeconds": {"p50": 0.4, "p99": 1.5, "max": 2.0}},
        {"firstBindSeconds": 0.6, "latencySeconds": {"p50": 0.3, "p99": 9.0, "max": 1.0}},
    ]
    summary = summarize_streams(rows)
    assert summary["firstBindSeconds"] == 0.6
    assert summary["latencySeconds"] == {"p50": 0.3, "p99": 1.5, "max": 2.0}
