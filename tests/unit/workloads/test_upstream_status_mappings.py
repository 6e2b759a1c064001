"""The status mappings of upstream's unrecorded types, each on an object built to meet it.

Upstream records no lifecycle for some of its types (RayService, NIMCache, Dynamo v1beta1,
LLMInferenceService v1alpha1),
so the mappings its definitions state are the answer there is: an object whose phase and
conditions are the ones a matcher names is in that matcher's status, and kai's catalog must
read it as upstream's definition does. An object with no status at all is checked the same
way, and so is each part alone of a matcher that needs a phase and conditions together.
Matchers that hold an expression are skipped: what satisfies one is not written down.
Types with recordings are judged by them instead (test_upstream_recordings.py): a bare
object built from one matcher lacks the fields a live one carries beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kai.workloads.catalog import catalog_registry
from kai.workloads.definition import StatusMatcher, WorkloadDefinition
from kai.workloads.objects import gvk_of
from kai.workloads.registry import DefinitionRegistry
from kai.workloads.status import workload_phases
from tests.unit.workloads.upstream_material import recorded_frames, upstream_registry


@dataclass(frozen=True)
class Probe:
    id: str
    definition: str
    state: str | None
    obj: dict[str, Any]


def _set(obj: dict[str, Any], path: str, value: object) -> bool:
    """Write value at a plain `.a.b` path; False for any other form of path."""
    keys = path.lstrip(".").split(".")
    if not path.startswith(".") or not all(key.isidentifier() for key in keys):
        return False
    target = obj
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value
    return True


def _bare(definition: WorkloadDefinition) -> dict[str, Any]:
    kind = definition.root.kind
    assert kind is not None
    api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
    return {"apiVersion": api_version, "kind": kind.kind, "metadata": {"name": "probe"}}


def _meeting(definition: WorkloadDefinition, matcher: StatusMatcher) -> dict[str, Any] | None:
    status = definition.root.status
    assert status is not None
    obj = _bare(definition)
    if matcher.by_expression is not None:
        return None
    if matcher.by_phase is not None and not (
        status.phase_path and _set(obj, status.phase_path, matcher.by_phase)
    ):
        return None
    if matcher.by_conditions:
        conditions = []
        for wanted in matcher.by_conditions:
            condition = {status.type_field: wanted.type}
            if wanted.status is not None:
                condition[status.status_field] = wanted.status
            if wanted.reason is not None:
                condition[status.reason_field] = wanted.reason
            conditions.append(condition)
        if not (status.conditions_path and _set(obj, status.conditions_path, conditions)):
            return None
    return obj


def probes() -> Iterator[Probe]:
    recorded = {frame.definition for frame in recorded_frames()}
    for definition in upstream_registry().definitions():
        status = definition.root.status
        if status is None or definition.name in recorded:
            continue
        yield Probe(f"{definition.name}:no-status", definition.name, None, _bare(definition))
        for state, matchers in status.mappings:
            for index, matcher in enumerate(matchers):
                obj = _meeting(definition, matcher)
                if obj is not None:
                    yield Probe(f"{definition.name}:{state}#{index}", definition.name, state, obj)
                yield from _parts(definition, state, index, matcher)


def _parts(
    definition: WorkloadDefinition, state: str, index: int, matcher: StatusMatcher
) -> Iterator[Probe]:
    """A matcher of a phase and conditions holds only on both: each alone is probed too."""
    if matcher.by_phase is None or not matcher.by_conditions:
        return
    for part, alone in (
        ("phase", StatusMatcher(by_phase=matcher.by_phase)),
        ("conditions", StatusMatcher(by_conditions=matcher.by_conditions)),
    ):
        obj = _meeting(definition, alone)
        if obj is not None:
            yield Probe(
                f"{definition.name}:{state}#{index}-{part}-alone", definition.name, None, obj
            )


PROBES = list(probes())


def test_the_unrecorded_types_are_probed() -> None:
    assert {probe.definition for probe in PROBES} == {
        "apps-nvidia-com-nimcache-v1alpha1",
        "nvidia-com-dynamographdeployment-v1beta1",
        "ray-io-rayservice-v1",
        "serving-kserve-io-llminferenceservice-v1alpha1",
    }


@pytest.fixture(scope="module")
def catalog() -> DefinitionRegistry:
    return catalog_registry()


@pytest.mark.parametrize("probe", PROBES, ids=[probe.id for probe in PROBES])
def test_catalog_reads_the_status_as_upstreams_definition_does(
    probe: Probe, catalog: DefinitionRegistry
) -> None:
    upstream = upstream_registry()
    theirs = upstream.get(gvk_of(probe.obj))
    assert theirs is not None and theirs.name == probe.definition
    expected = workload_phases(theirs, probe.obj, upstream.jq)
    if probe.state is not None:
        assert probe.state in expected
    ours = catalog.get(gvk_of(probe.obj))
    assert ours is not None, f"the catalog has no definition for {gvk_of(probe.obj)}"
    assert workload_phases(ours, probe.obj, catalog.jq) == expected
