"""The jq safety check and the bounded evaluator."""

from __future__ import annotations

import itertools

import pytest

from kai.workloads.jqeval import JqError, JqEvaluator, JqLimits
from kai.workloads.jqsafe import read_only_problems, simple_path


@pytest.mark.parametrize(
    ("program", "culprit"),
    [
        (".spec.suspend = true", "'='"),
        (".a |= 1", "'|='"),
        (".a += 1", "'+='"),
        (".a //= 1", "'//='"),
        ("del(.metadata)", "'del'"),
        ("[paths]", "'paths'"),
        ("recurse(.children[])", "'recurse'"),
        ("walk(.)", "'walk'"),
        ("[repeat(1)]", "'repeat'"),
        ("[range(5)]", "'range'"),
        (".. | .name?", "'..'"),
        ("def f: f; f", "'def'"),
        ("$ENV.HOME", "'$ENV'"),
        ("now", "'now'"),
        ('"id-\\(del(.a))"', "'del'"),  # code inside an interpolation is checked too
    ],
)
def test_writing_or_unbounded_programs_are_rejected(program: str, culprit: str) -> None:
    problems = read_only_problems(program)
    assert problems
    assert culprit in problems[0]


@pytest.mark.parametrize(
    "program",
    [
        ".spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)",
        '.metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0"',
        ".spec.services | to_entries[] | .key",
        '."del"',  # a field named like a forbidden function
        ".del",
        '"del(.a) is only text"',
        "{del: 1, range: 2} | .del",  # object keys, not calls
        ".spec.template as $t | $t.replicas",
        "if .a then 1 else 2 end",
        ".a == .b and .c != .d",
        "[.x[] | select(.y >= 2)] | length",
    ],
)
def test_read_only_programs_pass(program: str) -> None:
    assert read_only_problems(program) == []


def test_simple_path_recognises_write_targets_only() -> None:
    assert simple_path(".spec.runPolicy.suspend") == ("spec", "runPolicy", "suspend")
    assert simple_path('.metadata.labels["a/b"]') == ("metadata", "labels", "a/b")
    assert simple_path(".spec.replicatedJobs[].template") == (
        "spec",
        "replicatedJobs",
        None,
        "template",
    )
    assert simple_path(".a[0]") == ("a", 0)
    assert simple_path(".a + 1") is None
    assert simple_path("1") is None


def test_evaluator_bounds_the_number_of_results() -> None:
    evaluator = JqEvaluator(JqLimits(max_results=3))
    assert evaluator.all(".[]", [1, 2, 3]) == [1, 2, 3]
    with pytest.raises(JqError, match="more than 3 results"):
        evaluator.all(".[]", [1, 2, 3, 4])


def test_evaluator_bounds_the_running_time() -> None:
    ticks = itertools.count(0, 5)  # each clock read advances five seconds
    evaluator = JqEvaluator(JqLimits(timeout_seconds=12), clock=lambda: float(next(ticks)))
    with pytest.raises(JqError, match="longer than 12"):
        evaluator.all(".[]", list(range(10)))


def test_evaluator_refuses_unsafe_programs_even_unvalidated() -> None:
    with pytest.raises(JqError, match="'del'"):
        JqEvaluator().all("del(.a)", {"a": 1})


def test_evaluator_names_the_program_in_runtime_errors() -> None:
    with pytest.raises(JqError, match=r"\.a\[\]"):
        JqEvaluator().all(".a[]", {"a": 3})
