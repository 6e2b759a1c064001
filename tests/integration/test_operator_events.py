"""While a burst lasts, Scheduled events wait for its end; every other event goes out at once.

Each Scheduled event is one more write per bound pod on the API server the burst's
binds are waiting for, so the recorder holds them while the loop says the burst
continues and sends them, with the time they were recorded at, on the first flush
after it. Warnings (a pod that does not fit) are not held: a user waiting on one
needs it now. A replica that loses the Lease sends none of what it held.
"""

from __future__ import annotations

from typing import Any

from kai_operator_support import unique
from kubernetes_asyncio import client

from kai.kube.client import Kube, connect
from kai.operator.events import (
    NORMAL,
    SCHEDULED,
    UNSCHEDULABLE,
    WARNING,
    EventRecorder,
    InvolvedObject,
)
from kai.testing.controlplane import ClusterAccess


def _pod(namespace: str, name: str) -> InvolvedObject:
    return InvolvedObject("v1", "Pod", namespace, name, f"uid-{name}")


async def _events(api: client.ApiClient, namespace: str, prefix: str) -> list[Any]:
    listed = await client.CoreV1Api(api).list_namespaced_event(namespace)
    return [e for e in listed.items if e.involved_object.name.startswith(prefix)]


async def test_scheduled_events_are_held_while_a_burst_lasts_and_sent_after_it(
    api: client.ApiClient, namespace: str, control_plane: ClusterAccess
) -> None:
    prefix = unique("held")
    async with await connect(control_plane.kubeconfig) as connection:
        recorder = EventRecorder(Kube(connection), "test", held_limit=3)
        for index in range(4):  # one more than the recorder holds
            recorder.record(_pod(namespace, f"{prefix}-{index}"), NORMAL, SCHEDULED, "bound")
        recorder.record(_pod(namespace, f"{prefix}-big"), WARNING, UNSCHEDULABLE, "no room")
        await recorder.flush(burst_continues=True)
        sent = await _events(api, namespace, prefix)
        assert [(e.reason, e.involved_object.name) for e in sent] == [
            (UNSCHEDULABLE, f"{prefix}-big")
        ]
        assert recorder.dropped == 1  # the fourth Scheduled event found no room

        recorder.record(_pod(namespace, f"{prefix}-last"), NORMAL, SCHEDULED, "bound")
        await recorder.flush(burst_continues=False)  # the burst's last cycle
        scheduled = [e for e in await _events(api, namespace, prefix) if e.reason == SCHEDULED]
        names = sorted(e.involved_object.name for e in scheduled)
        assert names == [f"{prefix}-{index}" for index in range(3)] + [f"{prefix}-last"]

        recorder.record(_pod(namespace, f"{prefix}-lost"), NORMAL, SCHEDULED, "bound")
        await recorder.flush(burst_continues=True)
        recorder.discard()  # the Lease was lost: what was held is not sent
        await recorder.flush(burst_continues=False)
        names_now = {e.involved_object.name for e in await _events(api, namespace, prefix)}
        assert f"{prefix}-lost" not in names_now
