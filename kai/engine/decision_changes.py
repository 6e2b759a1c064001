"""Which PodGroups a cycle decided anew, so that what reads every decision reads only those.

Why: on a live cluster a cycle decides one or two groups beside thousands that stay
scheduled, and the passes after it (the status writer, the pending-groups metric) read
every decision to find the few that differ, a few milliseconds at 8,000 groups, twice
for every pod bound. The memo (`kai.engine.memo`) keeps a group's decision object while
the group, its pending pods and the queue tree stay as they were, so the decisions that
may differ from the last cycle's are few and known: the groups it sorted anew, those
waiting (each decided this cycle), those set aside, and the same of the cycle before
(whose fresh decisions this cycle may replace with kept ones).

The account holds against one mapping only: the `groups` of the result the same memo
made last. A reader that last read another mapping (a filtered copy, a cycle it did not
see, a memo that started over) reads everything, which is always right.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kai.engine.group_decision import GroupDecision


@dataclass(frozen=True, eq=False)
class DecisionChanges:
    """Every key outside `keys` maps to the very object it mapped to in `since`, or is in
    neither; None for `since`: no earlier mapping is known."""

    since: Mapping[str, GroupDecision] | None
    keys: frozenset[str]

    def keys_since(self, read: Mapping[str, GroupDecision] | None) -> Collection[str] | None:
        """The keys to look at for a reader that last read `read`; None: look at all."""
        if self.since is None or read is not self.since:
            return None
        return self.keys


NO_ACCOUNT = DecisionChanges(None, frozenset())
"""The account of a cycle that knows of no earlier one."""
