"""Child processes that cannot outlive the process that started them.

Each child runs in its own process group (so a terminal's Ctrl-C reaches only
the parent, which then stops the children in order) and gets SIGKILL from the
kernel if its parent dies without cleaning up, e.g. when pytest is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# Loaded before any fork: the child between fork and exec may only make the call.
_LIBC = ctypes.CDLL(None) if sys.platform == "linux" else None


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with(parent: int) -> None:
    """Runs in the forked child before exec: ask for SIGKILL when the parent exits."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


class Child:
    """One started program, its output going to a log file."""

    def __init__(self, name: str, argv: Sequence[str], log: Path) -> None:
        self.name = name
        self.log = log
        parent = os.getpid()
        with log.open("ab") as out:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Unsafe only if another thread holds a lock the child needs;
                # the hook takes none, and the children are started before
                # the tests start threads.
                preexec_fn=lambda: _die_with(parent),  # noqa: PLW1509
            )

    def exit_code(self) -> int | None:
        """The exit status, or None while the program runs."""
        return self._proc.poll()

    def stop(self, grace_seconds: float) -> None:
        """SIGTERM the process group, then SIGKILL it if it has not exited in time."""
        if self._proc.poll() is not None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            self._proc.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self._proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the program printed, for error messages."""
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(self._proc.pid, sig)
