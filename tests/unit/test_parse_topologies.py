"""Topology manifests: KAI's CRD and webhook rules, each refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.parse import parse_objects
from kai.api.topologies import parse_topology
from kai.engine.model import TopologyLevel
from kai.simulate.scenario import load_scenario
from tests.unit.engine.builders import NOW


def topology(*levels: dict[str, str], name: str = "dc") -> dict[str, Any]:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": list(levels)},
    }


def errors(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_topology(manifest)
    return [str(e) for e in caught.value.all_errors]


def test_levels_and_aliases_are_read_widest_first() -> None:
    parsed = parse_topology(
        topology(
            {"nodeLabel": "example.com/zone", "alias": "zone"},
            {"nodeLabel": "example.com/rack"},
            {"nodeLabel": "kubernetes.io/hostname", "alias": "host"},
        )
    )
    assert parsed.name == "dc"
    assert parsed.levels == (
        TopologyLevel("example.com/zone", "zone"),
        TopologyLevel("example.com/rack", None),
        TopologyLevel("kubernetes.io/hostname", "host"),
    )
    assert parsed.node_label("zone") == "example.com/zone"
    assert parsed.node_label("example.com/rack") == "example.com/rack"
    assert parsed.node_label("row") is None


@pytest.mark.parametrize(
    ("levels", "field", "words"),
    [
        ((), "spec.levels", "1 to 16 levels"),
        (({"nodeLabel": "a"},) * 17, "spec.levels", "got 17"),
        (({"alias": "x"},), "spec.levels[0].nodeLabel", "required"),
        (({"nodeLabel": "not a label"},), "spec.levels[0].nodeLabel", "not a valid label key"),
        (({"nodeLabel": "a"}, {"nodeLabel": "a"}), "spec.levels[1].nodeLabel", "used twice"),
        (
            ({"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}),
            "spec.levels[0].nodeLabel",
            "only be the last",
        ),
        (
            ({"nodeLabel": "a", "alias": "x"}, {"nodeLabel": "b", "alias": "x"}),
            "spec.levels[1].alias",
            "used twice",
        ),
        (
            ({"nodeLabel": "a"}, {"nodeLabel": "b", "alias": "a"}),
            "spec.levels[1].alias",
            "nodeLabel",
        ),
    ],
)
def test_each_of_kais_rules_is_refused_with_its_field(
    levels: tuple[dict[str, str], ...], field: str, words: str
) -> None:
    found = errors(topology(*levels))
    assert any(f"Topology dc: {field}: " in line and words in line for line in found), found


def test_a_scenario_carries_its_topologies_and_reports_a_bad_one_by_file() -> None:
    good = topology({"nodeLabel": "example.com/rack"})
    bad = topology({"nodeLabel": "a"}, {"nodeLabel": "a"}, name="broken")
    snapshot = load_scenario([("cluster.yaml", good)], NOW)
    assert [t.name for t in snapshot.topologies] == ["dc"]
    parsed = parse_objects([("cluster.yaml", bad)])
    assert parsed.problems == [
        "cluster.yaml: Topology broken: spec.levels[1].nodeLabel: 'a' is used twice"
    ]
