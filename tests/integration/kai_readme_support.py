"""Running the README's shell blocks as its reader would, for the install tests.

A block is the first code block under a `## ` heading; `Shell` runs its lines with bash
in the checkout, the built tools first on PATH, then the virtualenv's `kai`, and
`KUBECONFIG` set to the test control plane's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
COMMAND_SECONDS = 120.0


def readme_block(heading: str, readme: str = "") -> list[str]:
    """The commands of the first code block under `heading` (README.md unless `readme`)."""
    text = readme or README.read_text()
    assert heading in text, f"README.md has no {heading!r} section"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    fenced = False
    for line in section.splitlines():
        if line.startswith("```"):
            if fenced:
                break
            fenced = True
        elif fenced or line.startswith("    "):
            if line.strip():
                lines.append(line.strip())
        elif lines:
            break
    assert lines, f"no shell block under {heading!r}"
    return lines


class Shell:
    """Runs commands as the README's reader would: bash in the checkout, the built tools
    first on PATH, the virtualenv's `kai` next, KUBECONFIG set."""

    def __init__(self, tools: list[Path], kubeconfig: Path) -> None:
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join(
            [str(tool.parent) for tool in tools]
            + [str(Path(sys.executable).parent), self.env.get("PATH", "")]
        )
        self.env["KUBECONFIG"] = str(kubeconfig)
        self.log: list[str] = []

    async def run(self, command: str, check: bool = True) -> str:
        """Its stdout; fails naming the command and its stderr when it fails (with `check`)."""
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-o",
            "pipefail",
            "-c",
            command,
            cwd=REPO_ROOT,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(COMMAND_SECONDS):
                out, err = await process.communicate()
        finally:
            if process.returncode is None:  # timed out or cancelled: stop the whole pipeline
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                await process.wait()
        self.log.append(f"$ {command}\n{out.decode()}{err.decode()}")
        if check and process.returncode != 0:
            raise AssertionError(f"`{command}` exited {process.returncode}: {err.decode().strip()}")
        return out.decode()

    async def kubectl(self, *args: str, check: bool = True) -> str:
        return await self.run(shlex.join(["kubectl", *args]), check=check)
