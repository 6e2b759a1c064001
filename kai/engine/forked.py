"""Run a piece of the engine in a forked child process, so that a native crash costs its answer, not the scheduler.

OR-Tools checks its own invariants with CHECKs that abort the whole process (one did
once in this project's engine benchmark, see `kai.engine.solver.isolated`). Work that
may reach such a check runs in a child forked from the engine's thread: the child
inherits what it needs as it is in memory, does the work and writes its result back
as bytes; the parent reads them, or gets None when the child died, failed or did not
answer by the deadline (it is then killed and reaped). The caller keeps what it has
without the answer.

The child only works and writes: it runs no cleanup (`os._exit`), collects no
garbage (a finaliser must not touch the parent's sockets from the copy), and
restores the default signal handlers, so a signal meant for the scheduler is not
written into the scheduler's own event loop by the child.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import time
from collections.abc import Callable

_READ_SIZE = 1 << 20


def call_in_child(
    work: Callable[[], bytes],
    seconds: float,
    started: Callable[[int], None] | None = None,
) -> bytes | None:
    """What `work` returns, run in a forked child; None if the child died, failed or did
    not answer within `seconds`. `started`, when given, is told the child's pid."""
    deadline = time.monotonic() + seconds
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(readable)
        _work_and_exit(work, writable)
    os.close(writable)
    if started is not None:
        started(pid)
    try:
        written = _read_until(readable, deadline)
    finally:
        os.close(readable)
        if written is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if written is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    return written


def _work_and_exit(work: Callable[[], bytes], out: int) -> None:
    code = 1
    try:
        gc.disable()
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, signal.SIG_DFL)
        data = memoryview(work())
        while data:
            data = data[os.write(out, data) :]
        code = 0
    finally:
        os._exit(code)


def _read_until(readable: int, deadline: float) -> bytes | None:
    """Everything the child writes until it closes its end; None past the deadline."""
    chunks: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([readable], [], [], remaining)[0]:
            return None
        chunk = os.read(readable, _READ_SIZE)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
