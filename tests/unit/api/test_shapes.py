"""The field `kai.api.shapes` names when an object cannot be read: the first, in the
manifest's order, whose value breaks a shape Kubernetes keeps for that name in every kind."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError, ObjectRef
from kai.api.shapes import misshapen_field, naming_unreadable

REF = ObjectRef("Thing", "ns", "t")


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"spec": {"template": None, "replicas": None}}, None),  # null is no value
        ({"spec": {"replicas": 2.0, "parallelism": 3}}, None),  # YAML's 2.0 is 2
        ({"spec": {"minAvailable": "50%"}}, None),  # int or string: no convention
        ({"spec": {"replicas": True}}, ("spec.replicas", "a whole number expected, found true")),
        ({"spec": {"replicas": 1.5}}, ("spec.replicas", "a whole number expected, found 1.5")),
        ({"spec": ["x"]}, ("spec", "an object expected, found a list")),
        (
            {"spec": {"containers": {"name": "a"}}},
            ("spec.containers", "a list expected, found an object"),
        ),
        (
            {"spec": {"replicatedJobs": [{"template": {}}, {"template": 7}]}},
            ("spec.replicatedJobs[1].template", "an object expected, found 7"),
        ),
        (
            {"metadata": {"labels": "a" * 50}},
            ("metadata.labels", f"an object expected, found the string '{'a' * 37}...'"),
        ),
    ],
)
def test_the_first_value_against_its_fields_convention_is_named(
    manifest: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    assert misshapen_field(manifest) == expected


def test_the_first_in_the_manifests_order_is_named() -> None:
    manifest = {"spec": {"template": "x"}, "metadata": {"labels": []}}
    assert misshapen_field(manifest) == (
        "spec.template",
        "an object expected, found the string 'x'",
    )


def test_a_failure_is_reported_with_the_field_or_the_object_alone() -> None:
    def read(manifest: dict[str, Any]) -> Any:
        with naming_unreadable(REF, manifest):
            return manifest["spec"]["template"]["spec"]

    with pytest.raises(ManifestError) as raised:
        read({"spec": {"template": ["x"]}})
    assert (raised.value.field, raised.value.message) == (
        "spec.template",
        "an object expected, found a list",
    )
    with pytest.raises(ManifestError) as raised:
        read({"spec": {}})
    assert raised.value.field == ""
    assert raised.value.message.startswith("a value has a type or shape kai cannot read (KeyError")


def test_kais_own_errors_pass_through() -> None:
    own = REF.error("spec.x", "mine")
    with pytest.raises(ManifestError) as raised, naming_unreadable(REF, {"spec": "x"}):
        raise own
    assert raised.value is own
