"""How often CPython's cyclic garbage collector runs in `kai run`.

A cycle allocates hundreds of thousands of short-lived objects (parsed pods, the
engine's indexes, requests and responses) beside a watch cache of long-lived ones.
With CPython's default threshold (a young collection every 700 net allocations)
each 500-pod cycle of a 5,000-pod burst ran about 120 young collections and one
full one, which walks the whole cache: 230 ms of a one-second cycle, and 2.4 s of
the burst (measured with `gc.callbacks`). Reference counting frees almost all of
that garbage at once; the collector only finds cycles, so running it 70 times less
often holds a little cyclic garbage a little longer and costs nothing else. The engine's
cycle has since paused the collector for its own run (`kai.engine.collector`); this
threshold still governs the rest of the process beside and between cycles: the watch
events, the binds and the status writes.
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION_THRESHOLD = 50_000
"""Net allocations between two young collections (CPython's default: 700)."""


def collect_less_often() -> None:
    """Raise the young generation's threshold; the older generations' stay as they were."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, older, oldest)
