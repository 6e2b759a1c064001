"""A SchedulingLoop with only the parts a unit test reaches.

The loop's constructor takes every part typed as the real one. A test of one step
passes the parts that step reads (real ones, or stand-ins that do what it calls) and
leaves the rest absent, so that reaching an absent part fails loudly. Both are typed
`Any` here, once, instead of an ignore at every argument.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kai.operator.loop import SchedulingLoop

ABSENT: Any = None
"""A part the test never reaches."""


def stand_in(**attributes: Any) -> Any:
    """A part that has only the attributes the step reads."""
    return SimpleNamespace(**attributes)


def loop_reaching(**parts: Any) -> SchedulingLoop:
    """A loop built from `parts`; every part not given is absent."""
    settings: dict[str, Any] = {
        "cache": ABSENT,
        "builder": ABSENT,
        "grouper": ABSENT,
        "binder": ABSENT,
        "sharing": ABSENT,
        "status": ABSENT,
        "stamps": ABSENT,
        "events": ABSENT,
        "backoff": ABSENT,
        "metrics": ABSENT,
        "engine": ABSENT,
        "executor": ABSENT,
        "debounce_seconds": 0.0,
        "failed_cycles_unhealthy": 5,
    }
    return SchedulingLoop(**(settings | parts))
