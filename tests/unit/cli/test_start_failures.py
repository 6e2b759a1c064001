"""`kai run` and `kai webhook` that cannot start say why in one place and exit non-zero.

A missing `--kubeconfig` is refused by the argument parser (exit 2) before anything starts;
a kubeconfig that names no cluster gets through to kopf's startup handler, which fails,
and the process exits 1 with kopf's line naming the handler and the reason, no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = {
    "run": ["run", "--metrics-port=-1", "--liveness-endpoint="],
    "webhook": ["webhook", "--port=0", "--liveness-endpoint="],
}


def _kai(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kai.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_kubeconfig_is_refused_before_starting(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    done = _kai(*COMMANDS[command], f"--kubeconfig={missing}")
    assert done.returncode == 2
    assert f"{missing}: no such file" in done.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_kubeconfig_without_a_cluster_fails_the_start_with_its_reason(
    command: str, tmp_path: Path
) -> None:
    empty = tmp_path / "kubeconfig"
    empty.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    done = _kai(*COMMANDS[command], f"--kubeconfig={empty}")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "current-context" in done.stderr  # the client's reason, in kopf's handler line
    assert "did not start" in done.stderr
