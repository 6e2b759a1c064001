"""MIG slices read from a pod's requests and a node's labels and allocatable, as KAI
reads them (`kai.engine.mig` says what they decide).

- A slice resource `nvidia.com/mig-<g>g.<m>gb` counts `g` GPUs per slice against quotas
  and in the cluster's total (KAI's `ExtractGpuAndMemoryFromMigResourceName`). A profile
  with a suffix (`mig-1g.10gb+me`, media extensions) counts the same; KAI's pattern does
  not match it and counts it as no GPU.
- A node is MIG-enabled if its `node-role.kubernetes.io/mig-enabled` label says so (a Go
  boolean), else if it offers any slice; its strategy is its `nvidia.com/mig.strategy`
  label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

from kai.engine.mig import MIG_RESOURCE_PREFIX, MIXED, SINGLE

MIG_ENABLED_LABEL = "node-role.kubernetes.io/mig-enabled"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
_PROFILE = re.compile(re.escape(MIG_RESOURCE_PREFIX) + r"(\d+)g\.\d+gb(?:\+[a-z0-9.]+)?")
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
"""What Go's `strconv.ParseBool` reads, as KAI parses the label."""


def mig_gpus(amounts: Mapping[str, Fraction]) -> int:
    """The GPUs the MIG slices among these amounts count as: compute slices times count."""
    total = 0
    for name, amount in amounts.items():
        match = _PROFILE.fullmatch(name)
        if match is not None and amount > 0:
            total += int(match.group(1)) * math.floor(amount)
    return total


def mig_mode(labels: Mapping[str, str], allocatable: Mapping[str, Fraction]) -> str | None:
    """None when the node is not MIG-enabled; else its strategy ("" if none is set)."""
    enabled = labels.get(MIG_ENABLED_LABEL)
    if enabled in _GO_TRUE or enabled in _GO_FALSE:
        on = enabled in _GO_TRUE
    elif enabled is not None:
        on = False  # a value Go cannot parse: KAI reads it as not enabled
    else:
        on = any(
            name.startswith(MIG_RESOURCE_PREFIX) and amount > 0
            for name, amount in allocatable.items()
        )
    if not on:
        return None
    strategy = labels.get(MIG_STRATEGY_LABEL, "")
    return strategy if strategy in (MIXED, SINGLE) else ""
