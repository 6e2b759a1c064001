"""How many GPUs any placement could give the pods arrived so far: an upper bound.

Why: the trace benchmark's curves are read against targets and published policies, and
neither says how much of the distance to 100% no scheduler can close. Shares strand
what they leave of a device (an 810-milli share leaves 190 that only a smaller share can
use), and pods constrained to GPU models leave the other models' devices to the rest,
so at 100% arrived the answer is well below 100%. Pods arriving later cannot help those
before them, and moving pods (`--consolidate`) cannot beat it either: it bounds every
placement of the arrived pods, in any order.

The bound is the linear relaxation of packing the arrived pods' GPU asks onto the
cluster's devices (the configuration LP of bin packing, Gilmore and Gomory, 1961): each
device of a GPU model holds either one GPU of a whole-GPU pod allowed on that model or a
pattern of shares allowed on it, adding up to at most one GPU; no more devices of a
model than the cluster has, no more asks of a kind than have arrived; maximise the GPUs
held. What it leaves out only loosens it: which node a device is on (its CPU, memory
and pod slots, a multi-GPU pod's devices being on one node), the arrival order, and
whole numbers of patterns. The patterns are generated as the LP needs them, by a
knapsack over its duals, so the patterns of a mix of small shares (thousands per
device) are never listed.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from ortools.linear_solver import pywraplp

from bench.openb import ARRIVED_POINTS, MILLI, Sample, TraceNode, TracePod, read_at

Kind = tuple[int, frozenset[str]]
"""One device's ask (milli; `MILLI` for a whole GPU) and the GPU models it may use."""

_GAIN = 1e-7
"""A generated pattern must add more than this (milli per device) to enter the LP."""
_SLACK = 1e-6
"""Floating-point slack allowed before flooring the LP's optimum to whole milli."""


def packing_bound_at(
    order: Sequence[TracePod],
    samples: Sequence[Sample],
    nodes: Sequence[TraceNode],
    points: Iterable[int] = ARRIVED_POINTS,
) -> dict[str, float | None]:
    """The bound (%) at each arrived point, read as the curve reads its samples.

    A point's value bounds every sample the curve reads there: it is the bound for the
    pods arrived by the latest of them (the bound only grows as pods arrive).
    """
    cluster_gpus = sum(node.gpus for node in nodes)
    asked = [0]
    for pod in order:
        asked.append(asked[-1] + pod.gpu_request_milli)
    result: dict[str, float | None] = {}
    for point in points:
        read = read_at(samples, cluster_gpus, point)
        if not read:
            result[str(point)] = None
            continue
        arrived = bisect.bisect_right(asked, max(s.arrived_milli for s in read)) - 1
        bound = packing_bound_milli(order[:arrived], nodes)
        result[str(point)] = round(bound / cluster_gpus / 10, 2)
    return result


def packing_bound_milli(pods: Sequence[TracePod], nodes: Sequence[TraceNode]) -> int:
    """At most this many GPU milli of `pods` fit on the devices of `nodes`, by any placement."""
    devices: Counter[str] = Counter()
    for node in nodes:
        devices[node.model] += node.gpus
    models = frozenset(devices)
    asks: Counter[Kind] = Counter()
    for pod in pods:
        allowed = frozenset(pod.gpu_spec) & models if pod.gpu_spec else models
        if pod.gpu_milli > 0 and pod.num_gpu > 0 and allowed:  # else it holds no GPU anywhere
            asks[pod.gpu_milli, allowed] += pod.num_gpu
    return _PackingLp(devices, asks).solve()


class _PackingLp:
    def __init__(self, devices: Mapping[str, int], asks: Mapping[Kind, int]) -> None:
        self.asks = asks
        self.solver = pywraplp.Solver.CreateSolver("GLOP")
        self.held = self.solver.Objective()
        self.held.SetMaximization()
        self.devices = {model: self.solver.Constraint(0, count) for model, count in devices.items()}
        self.arrived = {kind: self.solver.Constraint(0, count) for kind, count in asks.items()}
        for model in devices:
            for kind in self._kinds_on(model):  # start from each kind alone on a device
                size = kind[0]
                self._add(model, {kind: min(asks[kind], MILLI // size)})

    def solve(self) -> int:
        while True:
            if self.solver.Solve() != pywraplp.Solver.OPTIMAL:
                raise RuntimeError("the packing LP has no optimum")  # feasible and bounded
            # The duals are read before any pattern is added: adding one discards them.
            price = {kind: limit.dual_value() for kind, limit in self.arrived.items()}
            device_price = {model: limit.dual_value() for model, limit in self.devices.items()}
            held = float(self.held.Value())
            better = []
            for model in self.devices:
                worth = {kind: kind[0] - price[kind] for kind in self._kinds_on(model)}
                pattern, value = _best_pattern(worth, self.asks)
                if value > device_price[model] + _GAIN:
                    better.append((model, pattern))
            if not better:
                return math.floor(held + _SLACK)
            for model, pattern in better:
                self._add(model, pattern)

    def _kinds_on(self, model: str) -> list[Kind]:
        return [kind for kind in self.asks if model in kind[1]]

    def _add(self, model: str, pattern: Mapping[Kind, int]) -> None:
        devices = self.solver.NumVar(0, self.solver.infinity(), "")
        self.devices[model].SetCoefficient(devices, 1)
        for kind, count in pattern.items():
            self.arrived[kind].SetCoefficient(devices, count)
        self.held.SetCoefficient(devices, sum(kind[0] * n for kind, n in pattern.items()))


def _best_pattern(
    worth: Mapping[Kind, float], asks: Mapping[Kind, int]
) -> tuple[dict[Kind, int], float]:
    """The asks one device can hold that are worth most: a bounded knapsack over milli.

    Each kind's copies are split into powers of two (1, 2, 4, ... and the rest), so every
    count up to its limit is a choice of parts, and the parts go through a 0/1 knapsack
    over the device's milli, one array operation each.
    """
    parts: list[tuple[Kind, int]] = []  # (kind, copies)
    for kind, value in worth.items():
        if value <= 0:
            continue
        left, copies = min(asks[kind], MILLI // kind[0]), 1
        while left > 0:
            take = min(copies, left)
            parts.append((kind, take))
            left -= take
            copies *= 2
    best = np.zeros(MILLI + 1)
    taken: list[np.ndarray] = []
    for kind, copies in parts:
        weight = kind[0] * copies
        with_part = np.full(MILLI + 1, -np.inf)
        with_part[weight:] = best[: MILLI + 1 - weight] + worth[kind] * copies
        chose = with_part > best
        taken.append(chose)
        best = np.where(chose, with_part, best)
    pattern: Counter[Kind] = Counter()
    room = int(np.argmax(best))
    value = float(best[room])
    for (kind, copies), chose in zip(reversed(parts), reversed(taken), strict=True):
        if chose[room]:
            pattern[kind] += copies
            room -= kind[0] * copies
    return dict(pattern), value
