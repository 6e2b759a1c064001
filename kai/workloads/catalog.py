"""The built-in catalog: one Karta definition per YAML file under `kai/workloads/catalog/`.

These definitions are ours, written from each type's public API. They ship as
package data so `kai workload` works without a cluster; a cluster definition for
the same type overrides the catalog one (see `DefinitionRegistry`).
"""

from __future__ import annotations

from importlib import resources

import yaml

from kai.workloads.definition import WorkloadDefinition
from kai.workloads.jqeval import JqEvaluator
from kai.workloads.loader import load_definition
from kai.workloads.registry import DefinitionRegistry


def load_catalog(jq: JqEvaluator) -> list[WorkloadDefinition]:
    """Every catalog definition, loaded and validated (an invalid file is a packaging bug)."""
    folder = resources.files("kai.workloads").joinpath("catalog")
    files = sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".yaml")), key=lambda e: e.name
    )
    return [load_definition(_parse(entry.read_text()), jq, "catalog") for entry in files]


def _parse(text: str) -> object:
    """libyaml's safe loader when PyYAML has it: the same documents, read 8x faster, and the
    catalog is read by every `kai workload` command."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def catalog_registry(jq: JqEvaluator | None = None) -> DefinitionRegistry:
    """A registry of the catalog alone, for use without a cluster."""
    evaluator = jq or JqEvaluator()
    return DefinitionRegistry(catalog=load_catalog(evaluator), jq=evaluator)
