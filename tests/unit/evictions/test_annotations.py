"""The PodGroup timestamps KAI keeps in annotations: read into the engine, written back the same way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.parse import default_priority_classes, parse_pod_group
from kai.api.podgroups import stamp_annotations


def pod_group(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml", "annotations": annotations},
        "spec": {"queue": "team"},
    }


def test_timestamps_are_read_from_annotations() -> None:
    parsed = parse_pod_group(
        pod_group(
            {
                "kai.scheduler/last-start-timestamp": "2026-05-31T23:00:00Z",
                "kai.scheduler/stale-podgroup-timestamp": "2026-05-31T23:30:00+02:00",
                "kai.scheduler/last-eviction-timestamp": "",
            }
        ),
        default_priority_classes(),
    )
    assert parsed.last_start == datetime(2026, 5, 31, 23, 0, tzinfo=UTC)
    assert parsed.stale_since == datetime(2026, 5, 31, 21, 30, tzinfo=UTC)
    assert parsed.last_eviction is None


def test_a_bad_timestamp_names_the_annotation() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_pod_group(
            pod_group({"kai.scheduler/last-start-timestamp": "yesterday"}),
            default_priority_classes(),
        )
    assert caught.value.field == "metadata.annotations.kai.scheduler/last-start-timestamp"
    assert "'yesterday'" in caught.value.message


def test_written_annotations_round_trip_and_none_removes() -> None:
    moment = datetime(2026, 6, 1, 0, 0, 5, tzinfo=UTC)
    written = stamp_annotations(moment, None, moment)
    assert written == {
        "kai.scheduler/last-start-timestamp": "2026-06-01T00:00:05Z",
        "kai.scheduler/stale-podgroup-timestamp": None,
        "kai.scheduler/last-eviction-timestamp": "2026-06-01T00:00:05Z",
    }
    kept = {key: value for key, value in written.items() if value is not None}
    parsed = parse_pod_group(pod_group(kept), default_priority_classes())
    assert (parsed.last_start, parsed.stale_since, parsed.last_eviction) == (moment, None, moment)
