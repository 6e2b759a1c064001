"""Temporary folders for control-plane runs, and removal of abandoned ones.

A run that is SIGKILLed cannot delete its folder (its processes still die,
see :mod:`kai.testing.processes`), so each folder names its owner's pid and
the next run deletes folders whose owner is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_PREFIX = "kai-controlplane-"
_OWNER = "owner.pid"


def make_workdir() -> Path:
    """A new private folder under the system temp folder, owned by this process."""
    parent = Path(tempfile.gettempdir())
    _remove_abandoned(parent)
    folder = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=parent))
    (folder / _OWNER).write_text(str(os.getpid()))
    return folder


def _remove_abandoned(parent: Path) -> None:
    for folder in parent.glob(f"{_PREFIX}*"):
        try:
            owner = int((folder / _OWNER).read_text())
        except (OSError, ValueError):  # not ours, or its owner is still writing it
            continue
        if not _running(owner):
            shutil.rmtree(folder, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    return True
