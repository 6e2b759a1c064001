"""Where the programs built by tests/controlplane/build.sh and tests/tools/build.sh live.

Each build script alone decides its cache folder (a hash of the pinned
versions), so this module asks it rather than computing the name twice.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

BUILD_COMMAND = "make controlplane  (or: bash tests/controlplane/build.sh)"


class BinariesMissingError(RuntimeError):
    """The programs are not built yet; the message says how to build them."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the upstream programs, all from one pinned release."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path

    @classmethod
    def in_folder(cls, folder: Path) -> Binaries:
        return cls(
            etcd=folder / "etcd",
            kube_apiserver=folder / "kube-apiserver",
            kube_controller_manager=folder / "kube-controller-manager",
            kube_scheduler=folder / "kube-scheduler",
        )

    def missing(self) -> list[Path]:
        paths = (self.etcd, self.kube_apiserver, self.kube_controller_manager, self.kube_scheduler)
        return [path for path in paths if not path.is_file()]


def default_repo_root() -> Path:
    """The checkout this module was imported from (kai/testing/ -> root)."""
    return Path(__file__).resolve().parents[2]


def locate_binaries(repo_root: Path) -> Binaries:
    """The built programs for this checkout's pins, or BinariesMissingError."""
    script = repo_root / "tests" / "controlplane" / "build.sh"
    if not script.is_file():
        raise BinariesMissingError(f"{script} not found: run from a kai checkout")
    result = subprocess.run(
        ["bash", str(script), "--print-dir"], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise BinariesMissingError(
            f"{script} --print-dir failed: {result.stderr.strip()}; build with {BUILD_COMMAND}"
        )
    binaries = Binaries.in_folder(Path(result.stdout.strip()))
    missing = binaries.missing()
    if missing:
        names = ", ".join(path.name for path in missing)
        raise BinariesMissingError(
            f"control-plane programs not built ({names} missing in "
            f"{missing[0].parent}); build them with: {BUILD_COMMAND}"
        )
    return binaries


TOOLS_BUILD_COMMAND = "make tools  (or: bash tests/tools/build.sh)"
TOOLS = ("helm", "kubectl")
"""The client programs tests/tools/build.sh builds: helm, and kubectl at the control
plane's release (a kubectl on PATH may be any version, and a fresh machine has none)."""


def locate_tool(repo_root: Path, name: str) -> Path:
    """The built `name` (helm or kubectl) for this checkout's pins, or BinariesMissingError."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; tests/tools/build.sh builds {', '.join(TOOLS)}")
    script = repo_root / "tests" / "tools" / "build.sh"
    if not script.is_file():
        raise BinariesMissingError(f"{script} not found: run from a kai checkout")
    result = subprocess.run(
        ["bash", str(script), "--print-dir", name], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise BinariesMissingError(
            f"{script} --print-dir {name} failed: {result.stderr.strip()}; "
            f"build with {TOOLS_BUILD_COMMAND}"
        )
    program = Path(result.stdout.strip()) / name
    if not program.is_file():
        raise BinariesMissingError(
            f"{name} not built ({program} missing); build it with: {TOOLS_BUILD_COMMAND}"
        )
    return program
