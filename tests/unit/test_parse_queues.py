"""Queue manifests into engine Queues: KAI's units and special values, warnings, the tree."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.parse import parse_queue, queue_warnings, validate_queue_tree
from kai.engine.model import UNLIMITED, Queue, QueueResource

ALL_UNLIMITED = {"quota": 0, "limit": -1, "overQuotaWeight": 1}


def queue(name: str = "team-a", parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resources": {"gpu": ALL_UNLIMITED, "cpu": ALL_UNLIMITED, "memory": ALL_UNLIMITED},
        **spec,
    }
    if parent is not None:
        body["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": body,
    }


def test_defaults_of_a_fully_specified_queue() -> None:
    parsed = parse_queue(queue(parent="dept"))
    assert parsed.name == "team-a"
    assert parsed.parent == "dept"
    assert parsed.priority == 100
    assert parsed.gpu == QueueResource(
        quota=Fraction(0), limit=UNLIMITED, over_quota_weight=Fraction(1)
    )
    assert queue_warnings(queue()) == []


def test_units_memory_mb_becomes_bytes_cpu_stays_millicores_gpu_stays_fractional() -> None:
    parsed = parse_queue(
        queue(
            resources={
                "gpu": {"quota": 2.5, "limit": 10, "overQuotaWeight": 3},
                "cpu": {"quota": 8000, "limit": 16000},
                "memory": {"quota": 1024, "limit": -1},
            }
        )
    )
    assert parsed.gpu == QueueResource(Fraction(5, 2), Fraction(10), Fraction(3))
    assert parsed.cpu.quota == 8000
    assert parsed.cpu.limit == 16000
    assert parsed.memory.quota == 1024 * 10**6
    assert parsed.memory.limit == UNLIMITED  # -1 is not scaled into -10^6


def test_an_unlimited_quota_stays_unlimited() -> None:
    parsed = parse_queue(queue(resources={"memory": {"quota": -1, "limit": -1}}))
    assert parsed.memory.quota == UNLIMITED


def test_unset_quota_and_limit_are_zero_and_unset_weight_is_one() -> None:
    parsed = parse_queue(queue(resources={"gpu": {"quota": 4, "limit": -1}}))
    assert parsed.cpu == QueueResource(
        quota=Fraction(0), limit=Fraction(0), over_quota_weight=Fraction(1)
    )
    assert parsed.memory.limit == 0


def test_unset_limits_are_warned_about_resource_by_resource() -> None:
    warnings = queue_warnings(
        queue(resources={"gpu": {"quota": 4, "limit": -1}, "cpu": {"limit": -1}})
    )
    assert [w.field for w in warnings] == ["spec.resources.memory.limit"]
    assert str(warnings[0]).startswith(
        "Queue team-a: spec.resources.memory.limit: unset, which KAI reads as 0"
    )


def test_a_decimal_quota_is_exact() -> None:
    parsed = parse_queue(queue(resources={"gpu": {"quota": 0.1, "limit": 0.3}}))
    assert parsed.gpu.quota == Fraction(1, 10)
    assert parsed.gpu.limit == Fraction(3, 10)


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"gpu": {"quota": -2}}, "spec.resources.gpu.quota"),
        ({"cpu": {"limit": -0.5}}, "spec.resources.cpu.limit"),
        ({"memory": {"overQuotaWeight": -1}}, "spec.resources.memory.overQuotaWeight"),
        ({"gpu": {"quota": "4"}}, "spec.resources.gpu.quota"),
    ],
)
def test_bad_resource_values_are_errors(resources: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_queue(queue(resources=resources))
    assert caught.value.field == field
    assert str(caught.value).startswith(f"Queue team-a: {field}: ")


def test_a_queue_without_resources_is_an_error_as_in_kais_webhook() -> None:
    manifest = queue()
    del manifest["spec"]["resources"]
    with pytest.raises(ManifestError) as caught:
        parse_queue(manifest)
    assert (caught.value.field, caught.value.message) == ("spec.resources", "required")


def test_priority_and_min_runtimes() -> None:
    parsed = parse_queue(queue(priority=200, preemptMinRuntime="90s", reclaimMinRuntime="1h30m"))
    assert parsed.priority == 200
    assert parsed.preempt_min_runtime_seconds == 90.0
    assert parsed.reclaim_min_runtime_seconds == 5400.0


def test_every_bad_field_is_reported() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_queue(queue(priority="high", preemptMinRuntime="soon"))
    assert sorted(e.field for e in caught.value.all_errors) == [
        "spec.preemptMinRuntime",
        "spec.priority",
    ]


def _tree(*links: tuple[str, str | None]) -> list[Queue]:
    return [Queue(name=name, parent=parent) for name, parent in links]


def test_a_valid_tree_has_no_errors() -> None:
    assert validate_queue_tree(_tree(("root", None), ("dept", "root"), ("team", "dept"))) == []


def test_a_missing_parent_is_an_error_on_the_child() -> None:
    errors = validate_queue_tree(_tree(("team", "dept")))
    assert [str(e) for e in errors] == [
        "Queue team: spec.parentQueue: parent queue 'dept' does not exist"
    ]


def test_every_queue_on_a_cycle_is_an_error() -> None:
    errors = validate_queue_tree(
        _tree(("a", "b"), ("b", "c"), ("c", "a"), ("leaf", "a"), ("self", "self"))
    )
    assert [(e.name, e.field) for e in errors] == [
        ("a", "spec.parentQueue"),
        ("b", "spec.parentQueue"),
        ("c", "spec.parentQueue"),
        ("self", "spec.parentQueue"),
    ]
    assert errors[0].message == "queues form a cycle: a -> b -> c -> a"
    assert errors[3].message == "queues form a cycle: self -> self"
