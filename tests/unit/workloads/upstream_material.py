"""Upstream's public Workload Map material, as ported into tests/fixtures/workload-map/.

The fixtures are upstream's own (github.com/dsx-ai-factory/workload-map, Apache-2.0, and its
previous home run-ai/karta): catalog definitions, and the e2e status recordings in which each
frame of a live workload carries the state upstream's recorder read from it. This module only
reads them, so that every test judges kai against what upstream states, never against kai's
own earlier output. See tests/fixtures/workload-map/README.md for what was condensed and how.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from kai.workloads.definition import WorkloadDefinition
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from kai.workloads.registry import DefinitionRegistry

ROOT = Path(__file__).parents[2] / "fixtures" / "workload-map"
DEFINITIONS = ROOT / "definitions"
RECORDED = ROOT / "recorded"


def definition_files() -> list[Path]:
    return sorted(DEFINITIONS.glob("*.yaml"))


def definition_document(name: str) -> dict[str, Any]:
    document = yaml.safe_load((DEFINITIONS / f"{name}.yaml").read_text())
    assert isinstance(document, dict)
    return document


@cache
def upstream_registry() -> DefinitionRegistry:
    """A registry of upstream's definitions alone, as a cluster holding them would have."""
    jq = JqEvaluator()
    definitions: list[WorkloadDefinition] = [
        load_definition(yaml.safe_load(path.read_text()), jq, "cluster")
        for path in definition_files()
    ]
    return DefinitionRegistry(cluster=definitions, jq=jq)


@dataclass(frozen=True)
class Frame:
    """One recorded frame: the workload object and the state upstream read from it."""

    recording: str
    index: int
    definition: str
    state: str
    obj: Mapping[str, Any]

    @property
    def id(self) -> str:
        return f"{self.recording}#{self.index}-{self.state}"


def recorded_frames() -> Iterator[Frame]:
    """Every frame of every recording, in recording order."""
    for path in sorted(RECORDED.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        for index, (state, obj) in enumerate(_frames(document)):
            yield Frame(path.stem, index, document["definition"], state, obj)


def _frames(document: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    if "states" in document:
        for entry in document["states"]:
            yield entry["state"], entry["object"]
        return
    # The older format: the first step holds the object, each later one a merge patch on it.
    current: dict[str, Any] = {}
    for step in document["steps"]:
        current = copy.deepcopy(step["cr"]) if "cr" in step else merge_patch(current, step["patch"])
        yield step["state"], current


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: mappings merge key by key, null removes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
