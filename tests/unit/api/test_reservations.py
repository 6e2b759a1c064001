"""A reservation pod counts by itself only while no pod on a node shares its device."""

from __future__ import annotations

from typing import Any

from kai.api.parse import parse_pod
from kai.api.reservations import counted_reservations


def _pod(name: str, namespace: str, group: str | None, node: str | None, **extra: Any) -> Any:
    labels = {"runai-gpu-group": group} if group is not None else {}
    manifest = {
        "metadata": {"name": name, "namespace": namespace, "labels": labels, **extra},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }
    return parse_pod(manifest, "")


def test_only_reservations_without_a_user_on_a_node_are_counted() -> None:
    used = _pod("res-used", "kai-resource-reservation", "dev-1", "n1")
    idle = _pod("res-idle", "kai-resource-reservation", "dev-2", "n1")
    unlabelled = _pod("res-bare", "kai-resource-reservation", None, "n1")
    user = _pod("half", "team", "dev-1", "n1")
    waiting = _pod("half-pending", "team", "dev-2", None)  # labelled but on no node
    counted = counted_reservations([used, idle, unlabelled], [user, waiting])
    assert [pod.name for pod in counted] == ["res-idle", "res-bare"]
