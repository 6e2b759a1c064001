"""Run a piece of the engine in a forked child process, so that a native crash costs its answer, not the scheduler.

OR-Tools checks its own invariants with CHECKs that abort the whole process (one did
once in this project's engine benchmark, see `kai.engine.solver.isolated`). Work that
may reach such a check runs in a child forked from the engine's thread: the child
inherits what it needs as it is in memory, does the work and writes its result back
as bytes; the parent reads them, or gets None when the child died, failed or did not
answer by the deadline (it is then killed and reaped). The caller keeps what it has
without the answer. A `Child` also lets the parent go on with its own work meanwhile.

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
    return Child(work, seconds, started).answer()


class Child:
    """One piece of work running in a forked child while the parent goes on with its own.

    The child starts at once. `answer` waits for what it writes (None as in
    `call_in_child`), `stop` kills it when its answer is no longer wanted; either reaps it,
    and a child is reaped once only, so the parent may call `stop` on every path out.
    """

    def __init__(
        self,
        work: Callable[[], bytes],
        seconds: float,
        started: Callable[[int], None] | None = None,
    ) -> None:
        self._deadline = time.monotonic() + seconds
        readable, writable = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(readable)
            _work_and_exit(work, writable)
        os.close(writable)
        self._pid: int | None = pid
        self._readable = readable
        if started is not None:
            started(pid)

    def answer(self) -> bytes | None:
        if self._pid is None:
            return None
        written: bytes | None = None
        try:
            written = _read_until(self._readable, self._deadline)
        finally:
            status = self._end(kill=written is None)  # a child that wrote all is exiting
        if written is None or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return None
        return written

    def stop(self) -> None:
        """Kill the child (if it has not been reaped) and reap it: its answer is not wanted."""
        if self._pid is not None:
            self._end(kill=True)

    def _end(self, kill: bool) -> int:
        """Close the pipe, kill the child if asked, reap it: its exit status."""
        pid, self._pid = self._pid, None
        assert pid is not None
        os.close(self._readable)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        return status


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
