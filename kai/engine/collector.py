"""CPython's cyclic garbage collector waits while a cycle runs, and collects once after it.

A cycle allocates hundreds of thousands of objects that live about as long as it does
(capacities, offers, placements, model terms). Each young collection walks every one of
them still alive, and every tenth of those walks the older ones too: on `bench/engine.py`'s
5,000-node cluster the collector ran about 1,100 young, 100 middle and 5 full collections
per cycle with CPython's thresholds, 0.8 s of a 4.3 s greedy-only cycle (0.15 s with the
threshold `kai run` sets, `kai.operator.gc_tuning`). Reference counting frees the cycle's
garbage as it goes; only reference cycles need the collector, and they can wait until the
cycle ends. There the objects the cycle allocated are collected once, young generation
only (0.08 s at 5,000 nodes), so the cycle pays for its own and not whoever allocates next;
but only once the young generation is past its threshold, when the collector would have
run anyway. A live steady cycle allocates less than `kai run`'s threshold
(`kai.operator.gc_tuning`), and collecting after each of them walked whatever the event
loop had allocated since the last: 7% of kai's samples holding the interpreter lock.

Decisions do not depend on it: the collector frees memory, it never changes a value.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """The collector off inside, then on again, if it was on, with one young collection
    if the young generation is past its threshold.

    Off already (a caller's own choice, or another thread's cycle in the same process)
    means it is left as it is: whoever turned it off turns it on.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        if gc.get_count()[0] > gc.get_threshold()[0]:
            gc.collect(0)
