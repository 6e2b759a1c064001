"""Why a pod fits no node names what it lacks there, with the numbers.

A share of several devices (`gpu-fraction-num-devices`) that a node cannot host was told
"no GPU device with N MiB free" beside eight idle devices of that node: the count, not the
memory, was short.
"""

from __future__ import annotations

from fractions import Fraction

from kai.engine.cycle import run_cycle
from kai.engine.model import EngineConfig
from tests.unit.engine.builders import group, node, pod, queue, snapshot


def _message(devices: int, on_node: int) -> str:
    share = pod("p-0", "p", portion=Fraction(1, 2), devices=devices)
    snap = snapshot(
        [node("n", gpus=on_node, gpu_memory_mib=40_000)],
        [share],
        [group("p", "q")],
        [queue("q")],
    )
    return run_cycle(snap, EngineConfig(time_limit_seconds=0)).groups["ns/p"].message


def test_a_share_of_more_devices_than_the_node_has_is_told_the_count() -> None:
    assert _message(devices=3, on_node=2).endswith(
        "1 node(s): fewer than 3 GPU devices with 20000 MiB free each (device memory 40000 MiB)"
    )


def test_a_share_of_one_device_is_told_the_memory() -> None:
    assert _message(devices=1, on_node=0).endswith(
        "1 node(s): no GPU device with 20000 MiB free (device memory 40000 MiB)"
    )
