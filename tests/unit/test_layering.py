"""The folder tree is the architecture: each layer imports only the layers below it.

Parsed from the sources, so a new import that runs back up a layer fails here rather
than in review: the engine reads no adapter, generic Kubernetes plumbing knows no
scheduler, and only the CLI sits above everything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kai

PACKAGE = Path(kai.__file__).parent

# A layer may import only the kai packages named here (and itself).
ALLOWED = {
    "api": {"engine"},
    "engine": set(),
    "grouping": {"api", "engine", "workloads"},
    "workloads": {"api", "engine"},
    "kube": set(),
    "simulate": {"api", "engine", "grouping", "workloads"},
    "operator": {"api", "engine", "grouping", "workloads", "kube"},
    "admission": {"api", "engine", "kube"},
    "inspect": {"api", "engine", "kube"},
    "testing": {"kube"},
}


def _kai_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found.update(name.split(".")[1] for name in names if name.startswith("kai."))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    offending = {
        str(path.relative_to(PACKAGE)): sorted(imports - ALLOWED[layer] - {layer})
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        if (imports := _kai_imports(path)) - ALLOWED[layer] - {layer}
    }
    assert offending == {}


def test_every_layer_is_listed() -> None:
    layers = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert layers - {"cli"} == set(ALLOWED)
