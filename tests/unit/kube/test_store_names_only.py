"""A store that reads only which objects exist (`Resource.names_only`): it keeps their
identity, not their contents, and a change of contents is no change."""

from __future__ import annotations

from typing import Any

from kai.kube.informer import Store


def _config_map(version: str, data: str) -> dict[str, Any]:
    metadata = {"name": "settings", "namespace": "ml", "uid": "u1", "resourceVersion": version}
    return {
        "kind": "ConfigMap",
        "metadata": {**metadata, "labels": {"a": "b"}},
        "data": {"k": data},
    }


def test_only_the_identity_is_kept_and_new_contents_change_nothing() -> None:
    store = Store(names_only=True)
    store.replace([_config_map("1", "x" * 1000)], "1")
    assert store.objects == {
        "ml/settings": {
            "metadata": {"name": "settings", "namespace": "ml", "uid": "u1", "resourceVersion": "1"}
        }
    }
    assert not store.apply({"type": "MODIFIED", "object": _config_map("2", "y")})
    assert store.apply({"type": "DELETED", "object": _config_map("3", "y")})
    assert store.objects == {}


def test_a_full_store_sees_the_same_change_as_one() -> None:
    store = Store()
    store.replace([_config_map("1", "x")], "1")
    assert store.apply({"type": "MODIFIED", "object": _config_map("2", "y")})
    assert store.objects["ml/settings"]["data"] == {"k": "y"}
