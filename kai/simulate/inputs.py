"""Read simulation input: YAML files with one or many documents, or stdin (`-`).

Each document comes out with the file it came from, so that a problem in it can
be reported as `FILE: Kind namespace/name: field: message`. Opening `kind: List`
wrappers and checking object shape is the parser's job (`kai.api.parse`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import yaml


class InputError(ValueError):
    """Files that cannot be read or are not YAML; one line per file."""


def read_documents(paths: Sequence[str]) -> list[tuple[str, object]]:
    documents: list[tuple[str, object]] = []
    problems: list[str] = []
    for path in paths:
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
            documents += [(path, doc) for doc in yaml.safe_load_all(text)]
        except OSError as error:
            problems.append(f"{path}: cannot read: {error.strerror or error}")
        except yaml.YAMLError as error:
            problems.append(f"{path}: not valid YAML: {' '.join(str(error).split())}")
    if problems:
        raise InputError("\n".join(problems))
    return documents
