"""kai's built-in catalog against upstream's recorded workloads: every frame, upstream's state.

Upstream records real operators driving real workloads through their lifecycle and files
each distinct object it saw with the state it read from the object's own fields
(tests/fixtures/workload-map/recorded). A definition is right for a frame when the
statuses it maps the object to include that state; a frame upstream reads as Undefined
must map to nothing else. The definition is found the way `kai workload describe` finds
it: the catalog entry for the object's type, else another version of the same kind.
"""

from __future__ import annotations

import pytest

from kai.workloads.catalog import catalog_registry
from kai.workloads.definition import UNDEFINED_STATUS
from kai.workloads.objects import gvk_of
from kai.workloads.registry import DefinitionRegistry
from kai.workloads.status import workload_phases
from tests.unit.workloads.upstream_material import Frame, recorded_frames

FRAMES = list(recorded_frames())


@pytest.fixture(scope="module")
def catalog() -> DefinitionRegistry:
    return catalog_registry()


def test_every_recording_is_read() -> None:
    assert len({frame.recording for frame in FRAMES}) >= 60
    assert len(FRAMES) >= 250


@pytest.mark.parametrize("frame", FRAMES, ids=[frame.id for frame in FRAMES])
def test_catalog_maps_the_recorded_state(frame: Frame, catalog: DefinitionRegistry) -> None:
    definition = catalog.find(gvk_of(frame.obj))
    assert definition is not None, f"no catalog definition for {gvk_of(frame.obj)}"
    assert definition.name == frame.definition
    phases = workload_phases(definition, frame.obj, catalog.jq)
    if frame.state == UNDEFINED_STATUS:
        assert phases == [UNDEFINED_STATUS]
    else:
        assert frame.state in phases
