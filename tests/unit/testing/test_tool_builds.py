"""tests/tools/build.sh names its cache folders after the pins, and kai.testing.binaries finds
the programs there or says how to build them. Nothing is built here: `--print-dir` only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kai.testing.binaries import TOOLS_BUILD_COMMAND, BinariesMissingError, locate_tool

REPO_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="build.sh needs go on PATH")


def _copy_of_the_build(tmp_path: Path) -> Path:
    """A repo-shaped copy of what build.sh reads, to change without touching the checkout."""
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "tests" / "tools", root / "tests" / "tools")
    (root / "tests" / "controlplane").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tests" / "controlplane" / "go.mod", root / "tests" / "controlplane")
    return root


def _print_dirs(root: Path, cache: Path, *names: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "tests" / "tools" / "build.sh"), "--print-dir", *names],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": _path(), "HOME": str(cache), "XDG_CACHE_HOME": str(cache)},
    )


def _path() -> str:
    go = shutil.which("go")
    assert go is not None
    return f"{Path(go).parent}:/usr/bin:/bin"


def test_folders_are_named_after_the_pins_and_kubectl_matches_the_control_plane(
    tmp_path: Path,
) -> None:
    result = _print_dirs(REPO_ROOT, tmp_path)
    assert result.returncode == 0, result.stderr
    helm, kubectl = (Path(line) for line in result.stdout.splitlines())
    assert helm.parent == kubectl.parent == tmp_path / "kai" / "tools"
    assert helm.name.startswith("helm-v3.22.0-")
    control_plane = (REPO_ROOT / "tests" / "controlplane" / "go.mod").read_text()
    assert "k8s.io/kubernetes v1.36.3" in control_plane
    assert kubectl.name.startswith("kubectl-v1.36.3-")
    assert not helm.exists() and not kubectl.exists()  # --print-dir builds nothing

    only = _print_dirs(REPO_ROOT, tmp_path, "kubectl")
    assert only.stdout.splitlines() == [str(kubectl)]


def test_the_key_covers_the_sources(tmp_path: Path) -> None:
    root = _copy_of_the_build(tmp_path)
    before = _print_dirs(root, tmp_path).stdout.splitlines()
    assert before == _print_dirs(REPO_ROOT, tmp_path).stdout.splitlines()
    main = root / "tests" / "tools" / "kubectl" / "main.go"
    main.write_text(main.read_text() + "\n// changed\n")
    after = _print_dirs(root, tmp_path).stdout.splitlines()
    assert after[0] == before[0]  # helm's key does not cover kubectl's files
    assert after[1] != before[1] and after[1].startswith(before[1][: -len("0123456789abcdef")])


def test_a_kubectl_pin_that_drifts_from_the_control_plane_is_refused(tmp_path: Path) -> None:
    root = _copy_of_the_build(tmp_path)
    go_mod = root / "tests" / "tools" / "kubectl" / "go.mod"
    go_mod.write_text(
        go_mod.read_text().replace("k8s.io/kubectl v0.36.3", "k8s.io/kubectl v0.36.2")
    )
    result = _print_dirs(root, tmp_path, "kubectl")
    assert result.returncode == 1
    assert "k8s.io/kubectl v0.36.2" in result.stderr and "pin v0.36.3" in result.stderr


def test_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    result = _print_dirs(REPO_ROOT, tmp_path, "kubeadm")
    assert result.returncode == 2 and "unknown tool 'kubeadm'" in result.stderr


def test_a_missing_tool_names_the_build_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(BinariesMissingError) as missing:
        locate_tool(REPO_ROOT, "helm")
    assert TOOLS_BUILD_COMMAND in str(missing.value)
    assert str(tmp_path / "kai" / "tools" / "helm-v3.22.0-") in str(missing.value)

    folder = Path(_print_dirs(REPO_ROOT, tmp_path, "helm").stdout.strip())
    folder.mkdir(parents=True)
    (folder / "helm").write_text("")
    assert locate_tool(REPO_ROOT, "helm") == folder / "helm"
    with pytest.raises(ValueError, match="unknown tool"):
        locate_tool(REPO_ROOT, "kubeadm")
