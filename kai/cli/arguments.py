"""Argument types the `kai` commands share, so each refuses a bad value alike, before any work.

A `--kubeconfig` that does not exist used to reach the Kubernetes client, which said
"Expected key current-context" about a file it never found.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def kubeconfig_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return path
